! mpi_f08.f90: the mpi_f08 module of qcg (MPI 3.1 section 17.2.2), compiled by
! qcg-mpif90 on first use. Generated from mpi.h and mpi/api/functions.txt by
! mpi/src/api.rs: do not edit.
module qcg_mpi_f08_types
  implicit none
  type, bind(C) :: MPI_Comm
    integer :: MPI_VAL
  end type MPI_Comm
  type, bind(C) :: MPI_Datatype
    integer :: MPI_VAL
  end type MPI_Datatype
  type, bind(C) :: MPI_Op
    integer :: MPI_VAL
  end type MPI_Op
  type, bind(C) :: MPI_Group
    integer :: MPI_VAL
  end type MPI_Group
  type, bind(C) :: MPI_Request
    integer :: MPI_VAL
  end type MPI_Request
  type, bind(C) :: MPI_Errhandler
    integer :: MPI_VAL
  end type MPI_Errhandler
  type, bind(C) :: MPI_Info
    integer :: MPI_VAL
  end type MPI_Info
  type, bind(C) :: MPI_Message
    integer :: MPI_VAL
  end type MPI_Message
  type, bind(C) :: MPI_Win
    integer :: MPI_VAL
  end type MPI_Win
  type, bind(C) :: MPI_File
    integer :: MPI_VAL
  end type MPI_File
  type, bind(C) :: MPI_Status
    integer :: MPI_SOURCE, MPI_TAG, MPI_ERROR
    integer :: qcg_cancelled, qcg_count_lo, qcg_count_hi
  end type MPI_Status
end module qcg_mpi_f08_types

module qcg_mpi_f08_bindings
  use qcg_mpi_f08_types
  implicit none
  interface
    subroutine mpi_send(buf, count, datatype, dest, tag, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_send
    subroutine mpi_ssend(buf, count, datatype, dest, tag, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_ssend
    subroutine mpi_recv(buf, count, datatype, source, tag, comm, status, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_recv
    subroutine mpi_isend(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_isend
    subroutine mpi_irecv(buf, count, datatype, source, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_irecv
    subroutine mpi_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, &
        recvtype, source, recvtag, comm, status, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      integer :: dest
      integer :: sendtag
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: source
      integer :: recvtag
      type(MPI_Comm) :: comm
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_sendrecv
    subroutine mpi_sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, &
        status, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: sendtag
      integer :: source
      integer :: recvtag
      type(MPI_Comm) :: comm
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_sendrecv_replace
    subroutine mpi_wait(request, status, ierror)
      import
      type(MPI_Request) :: request
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_wait
    subroutine mpi_waitall(count, array_of_requests, array_of_statuses, ierror)
      import
      integer :: count
      type(MPI_Request) :: array_of_requests(*)
      type(MPI_Status) :: array_of_statuses(*)
      integer :: ierror
    end subroutine mpi_waitall
    subroutine mpi_waitany(count, array_of_requests, index, status, ierror)
      import
      integer :: count
      type(MPI_Request) :: array_of_requests(*)
      integer :: index
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_waitany
    subroutine mpi_waitsome(incount, array_of_requests, outcount, array_of_indices, &
        array_of_statuses, ierror)
      import
      integer :: incount
      type(MPI_Request) :: array_of_requests(*)
      integer :: outcount
      integer :: array_of_indices(*)
      type(MPI_Status) :: array_of_statuses(*)
      integer :: ierror
    end subroutine mpi_waitsome
    subroutine mpi_test(request, flag, status, ierror)
      import
      type(MPI_Request) :: request
      logical :: flag
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_test
    subroutine mpi_testall(count, array_of_requests, flag, array_of_statuses, ierror)
      import
      integer :: count
      type(MPI_Request) :: array_of_requests(*)
      logical :: flag
      type(MPI_Status) :: array_of_statuses(*)
      integer :: ierror
    end subroutine mpi_testall
    subroutine mpi_testany(count, array_of_requests, index, flag, status, ierror)
      import
      integer :: count
      type(MPI_Request) :: array_of_requests(*)
      integer :: index
      logical :: flag
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_testany
    subroutine mpi_probe(source, tag, comm, status, ierror)
      import
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_probe
    subroutine mpi_iprobe(source, tag, comm, flag, status, ierror)
      import
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      logical :: flag
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_iprobe
    subroutine mpi_get_count(status, datatype, count, ierror)
      import
      type(MPI_Status) :: status
      type(MPI_Datatype) :: datatype
      integer :: count
      integer :: ierror
    end subroutine mpi_get_count
    subroutine mpi_cancel(request, ierror)
      import
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_cancel
    subroutine mpi_test_cancelled(status, flag, ierror)
      import
      type(MPI_Status) :: status
      logical :: flag
      integer :: ierror
    end subroutine mpi_test_cancelled
    subroutine mpi_request_free(request, ierror)
      import
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_request_free
    subroutine mpi_bsend(buf, count, datatype, dest, tag, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_bsend
    subroutine mpi_rsend(buf, count, datatype, dest, tag, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_rsend
    subroutine mpi_ibsend(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ibsend
    subroutine mpi_issend(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_issend
    subroutine mpi_irsend(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_irsend
    subroutine mpi_buffer_attach(buffer, size, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer
      type(*), dimension(*) :: buffer
      integer :: size
      integer :: ierror
    end subroutine mpi_buffer_attach
    subroutine mpi_buffer_detach(buffer_addr, size, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer_addr
      type(*), dimension(*) :: buffer_addr
      integer :: size
      integer :: ierror
    end subroutine mpi_buffer_detach
    subroutine mpi_send_init(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_send_init
    subroutine mpi_bsend_init(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_bsend_init
    subroutine mpi_ssend_init(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ssend_init
    subroutine mpi_rsend_init(buf, count, datatype, dest, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: dest
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_rsend_init
    subroutine mpi_recv_init(buf, count, datatype, source, tag, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_recv_init
    subroutine mpi_start(request, ierror)
      import
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_start
    subroutine mpi_startall(count, array_of_requests, ierror)
      import
      integer :: count
      type(MPI_Request) :: array_of_requests(*)
      integer :: ierror
    end subroutine mpi_startall
    subroutine mpi_mprobe(source, tag, comm, message, status, ierror)
      import
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      type(MPI_Message) :: message
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_mprobe
    subroutine mpi_improbe(source, tag, comm, flag, message, status, ierror)
      import
      integer :: source
      integer :: tag
      type(MPI_Comm) :: comm
      logical :: flag
      type(MPI_Message) :: message
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_improbe
    subroutine mpi_mrecv(buf, count, datatype, message, status, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Message) :: message
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_mrecv
    subroutine mpi_imrecv(buf, count, datatype, message, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
      type(*), dimension(*) :: buf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Message) :: message
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_imrecv
    subroutine mpi_testsome(incount, array_of_requests, outcount, array_of_indices, &
        array_of_statuses, ierror)
      import
      integer :: incount
      type(MPI_Request) :: array_of_requests(*)
      integer :: outcount
      integer :: array_of_indices(*)
      type(MPI_Status) :: array_of_statuses(*)
      integer :: ierror
    end subroutine mpi_testsome
    subroutine mpi_request_get_status(request, flag, status, ierror)
      import
      type(MPI_Request) :: request
      logical :: flag
      type(MPI_Status) :: status
      integer :: ierror
    end subroutine mpi_request_get_status
    subroutine mpi_status_set_elements(status, datatype, count, ierror)
      import
      type(MPI_Status) :: status
      type(MPI_Datatype) :: datatype
      integer :: count
      integer :: ierror
    end subroutine mpi_status_set_elements
    subroutine mpi_status_set_elements_x(status, datatype, count, ierror)
      import
      type(MPI_Status) :: status
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: count
      integer :: ierror
    end subroutine mpi_status_set_elements_x
    subroutine mpi_status_set_cancelled(status, flag, ierror)
      import
      type(MPI_Status) :: status
      logical :: flag
      integer :: ierror
    end subroutine mpi_status_set_cancelled
    subroutine mpi_ibarrier(comm, request, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ibarrier
    subroutine mpi_ibcast(buffer, count, datatype, root, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer
      type(*), dimension(*) :: buffer
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: root
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ibcast
    subroutine mpi_ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      integer :: root
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ireduce
    subroutine mpi_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iallreduce
    subroutine mpi_igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_igather
    subroutine mpi_igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
        root, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_igatherv
    subroutine mpi_iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iscatter
    subroutine mpi_iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, &
        root, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iscatterv
    subroutine mpi_iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iallgather
    subroutine mpi_iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
        comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iallgatherv
    subroutine mpi_ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ialltoall
    subroutine mpi_ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, &
        recvtype, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: sdispls(*)
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: rdispls(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ialltoallv
    subroutine mpi_ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, &
        rdispls, recvtypes, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: sdispls(*)
      type(MPI_Datatype) :: sendtypes(*)
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: rdispls(*)
      type(MPI_Datatype) :: recvtypes(*)
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ialltoallw
    subroutine mpi_ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, &
        ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ireduce_scatter
    subroutine mpi_ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request, &
        ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ireduce_scatter_block
    subroutine mpi_iscan(sendbuf, recvbuf, count, datatype, op, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iscan
    subroutine mpi_iexscan(sendbuf, recvbuf, count, datatype, op, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_iexscan
    subroutine mpi_type_size(datatype, size, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: size
      integer :: ierror
    end subroutine mpi_type_size
    subroutine mpi_type_get_extent(datatype, lb, extent, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: lb
      integer(kind=8) :: extent
      integer :: ierror
    end subroutine mpi_type_get_extent
    subroutine mpi_type_contiguous(count, oldtype, newtype, ierror)
      import
      integer :: count
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_contiguous
    subroutine mpi_type_vector(count, blocklength, stride, oldtype, newtype, ierror)
      import
      integer :: count
      integer :: blocklength
      integer :: stride
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_vector
    subroutine mpi_type_create_struct(count, array_of_blocklengths, array_of_displacements, &
        array_of_types, newtype, ierror)
      import
      integer :: count
      integer :: array_of_blocklengths(*)
      integer(kind=8) :: array_of_displacements(*)
      type(MPI_Datatype) :: array_of_types(*)
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_struct
    subroutine mpi_type_commit(datatype, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: ierror
    end subroutine mpi_type_commit
    subroutine mpi_type_free(datatype, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: ierror
    end subroutine mpi_type_free
    subroutine mpi_type_set_name(datatype, type_name, ierror)
      import
      type(MPI_Datatype) :: datatype
      character(len=*) :: type_name
      integer :: ierror
    end subroutine mpi_type_set_name
    subroutine mpi_type_get_name(datatype, type_name, resultlen, ierror)
      import
      type(MPI_Datatype) :: datatype
      character(len=*) :: type_name
      integer :: resultlen
      integer :: ierror
    end subroutine mpi_type_get_name
    subroutine mpi_type_create_keyval(type_copy_attr_fn, type_delete_attr_fn, type_keyval, &
        extra_state, ierror)
      import
      external :: type_copy_attr_fn
      external :: type_delete_attr_fn
      integer :: type_keyval
      integer(kind=8) :: extra_state
      integer :: ierror
    end subroutine mpi_type_create_keyval
    subroutine mpi_type_free_keyval(type_keyval, ierror)
      import
      integer :: type_keyval
      integer :: ierror
    end subroutine mpi_type_free_keyval
    subroutine mpi_type_set_attr(datatype, type_keyval, attribute_val, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: type_keyval
      integer(kind=8) :: attribute_val
      integer :: ierror
    end subroutine mpi_type_set_attr
    subroutine mpi_type_get_attr(datatype, type_keyval, attribute_val, flag, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: type_keyval
      integer(kind=8) :: attribute_val
      logical :: flag
      integer :: ierror
    end subroutine mpi_type_get_attr
    subroutine mpi_type_delete_attr(datatype, type_keyval, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: type_keyval
      integer :: ierror
    end subroutine mpi_type_delete_attr
    subroutine mpi_type_size_x(datatype, size, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: size
      integer :: ierror
    end subroutine mpi_type_size_x
    subroutine mpi_type_get_extent_x(datatype, lb, extent, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: lb
      integer(kind=8) :: extent
      integer :: ierror
    end subroutine mpi_type_get_extent_x
    subroutine mpi_type_get_true_extent(datatype, true_lb, true_extent, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: true_lb
      integer(kind=8) :: true_extent
      integer :: ierror
    end subroutine mpi_type_get_true_extent
    subroutine mpi_type_get_true_extent_x(datatype, true_lb, true_extent, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: true_lb
      integer(kind=8) :: true_extent
      integer :: ierror
    end subroutine mpi_type_get_true_extent_x
    subroutine mpi_type_create_hvector(count, blocklength, stride, oldtype, newtype, ierror)
      import
      integer :: count
      integer :: blocklength
      integer(kind=8) :: stride
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_hvector
    subroutine mpi_type_indexed(count, array_of_blocklengths, array_of_displacements, oldtype, &
        newtype, ierror)
      import
      integer :: count
      integer :: array_of_blocklengths(*)
      integer :: array_of_displacements(*)
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_indexed
    subroutine mpi_type_create_hindexed(count, array_of_blocklengths, array_of_displacements, &
        oldtype, newtype, ierror)
      import
      integer :: count
      integer :: array_of_blocklengths(*)
      integer(kind=8) :: array_of_displacements(*)
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_hindexed
    subroutine mpi_type_create_indexed_block(count, blocklength, array_of_displacements, oldtype, &
        newtype, ierror)
      import
      integer :: count
      integer :: blocklength
      integer :: array_of_displacements(*)
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_indexed_block
    subroutine mpi_type_create_hindexed_block(count, blocklength, array_of_displacements, oldtype, &
        newtype, ierror)
      import
      integer :: count
      integer :: blocklength
      integer(kind=8) :: array_of_displacements(*)
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_hindexed_block
    subroutine mpi_type_create_subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, &
        order, oldtype, newtype, ierror)
      import
      integer :: ndims
      integer :: array_of_sizes(*)
      integer :: array_of_subsizes(*)
      integer :: array_of_starts(*)
      integer :: order
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_subarray
    subroutine mpi_type_create_darray(size, rank, ndims, array_of_gsizes, array_of_distribs, &
        array_of_dargs, array_of_psizes, order, oldtype, newtype, ierror)
      import
      integer :: size
      integer :: rank
      integer :: ndims
      integer :: array_of_gsizes(*)
      integer :: array_of_distribs(*)
      integer :: array_of_dargs(*)
      integer :: array_of_psizes(*)
      integer :: order
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_darray
    subroutine mpi_type_create_resized(oldtype, lb, extent, newtype, ierror)
      import
      type(MPI_Datatype) :: oldtype
      integer(kind=8) :: lb
      integer(kind=8) :: extent
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_create_resized
    subroutine mpi_type_dup(oldtype, newtype, ierror)
      import
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_dup
    subroutine mpi_type_match_size(typeclass, size, datatype, ierror)
      import
      integer :: typeclass
      integer :: size
      type(MPI_Datatype) :: datatype
      integer :: ierror
    end subroutine mpi_type_match_size
    subroutine mpi_type_get_envelope(datatype, num_integers, num_addresses, num_datatypes, &
        combiner, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: num_integers
      integer :: num_addresses
      integer :: num_datatypes
      integer :: combiner
      integer :: ierror
    end subroutine mpi_type_get_envelope
    subroutine mpi_type_get_contents(datatype, max_integers, max_addresses, max_datatypes, &
        array_of_integers, array_of_addresses, array_of_datatypes, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer :: max_integers
      integer :: max_addresses
      integer :: max_datatypes
      integer :: array_of_integers(*)
      integer(kind=8) :: array_of_addresses(*)
      type(MPI_Datatype) :: array_of_datatypes(*)
      integer :: ierror
    end subroutine mpi_type_get_contents
    subroutine mpi_get_elements(status, datatype, count, ierror)
      import
      type(MPI_Status) :: status
      type(MPI_Datatype) :: datatype
      integer :: count
      integer :: ierror
    end subroutine mpi_get_elements
    subroutine mpi_get_elements_x(status, datatype, count, ierror)
      import
      type(MPI_Status) :: status
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: count
      integer :: ierror
    end subroutine mpi_get_elements_x
    subroutine mpi_get_address(location, address, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: location
      type(*), dimension(*) :: location
      integer(kind=8) :: address
      integer :: ierror
    end subroutine mpi_get_address
    subroutine mpi_pack(inbuf, incount, datatype, outbuf, outsize, position, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
      type(*), dimension(*) :: inbuf
      integer :: incount
      type(MPI_Datatype) :: datatype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
      type(*), dimension(*) :: outbuf
      integer :: outsize
      integer :: position
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_pack
    subroutine mpi_unpack(inbuf, insize, position, outbuf, outcount, datatype, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
      type(*), dimension(*) :: inbuf
      integer :: insize
      integer :: position
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
      type(*), dimension(*) :: outbuf
      integer :: outcount
      type(MPI_Datatype) :: datatype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_unpack
    subroutine mpi_pack_size(incount, datatype, comm, size, ierror)
      import
      integer :: incount
      type(MPI_Datatype) :: datatype
      type(MPI_Comm) :: comm
      integer :: size
      integer :: ierror
    end subroutine mpi_pack_size
    subroutine mpi_pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position, &
        ierror)
      import
      character(len=*) :: datarep
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
      type(*), dimension(*) :: inbuf
      integer :: incount
      type(MPI_Datatype) :: datatype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
      type(*), dimension(*) :: outbuf
      integer(kind=8) :: outsize
      integer(kind=8) :: position
      integer :: ierror
    end subroutine mpi_pack_external
    subroutine mpi_unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype, &
        ierror)
      import
      character(len=*) :: datarep
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
      type(*), dimension(*) :: inbuf
      integer(kind=8) :: insize
      integer(kind=8) :: position
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
      type(*), dimension(*) :: outbuf
      integer :: outcount
      type(MPI_Datatype) :: datatype
      integer :: ierror
    end subroutine mpi_unpack_external
    subroutine mpi_pack_external_size(datarep, incount, datatype, size, ierror)
      import
      character(len=*) :: datarep
      integer :: incount
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: size
      integer :: ierror
    end subroutine mpi_pack_external_size
    subroutine mpi_type_hvector(count, blocklength, stride, oldtype, newtype, ierror)
      import
      integer :: count
      integer :: blocklength
      integer(kind=8) :: stride
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_hvector
    subroutine mpi_type_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype, &
        newtype, ierror)
      import
      integer :: count
      integer :: array_of_blocklengths(*)
      integer(kind=8) :: array_of_displacements(*)
      type(MPI_Datatype) :: oldtype
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_hindexed
    function mpi_aint_add(base, disp)
      import
      integer(kind=8) :: base
      integer(kind=8) :: disp
      integer(kind=8) :: mpi_aint_add
    end function mpi_aint_add
    function mpi_aint_diff(addr1, addr2)
      import
      integer(kind=8) :: addr1
      integer(kind=8) :: addr2
      integer(kind=8) :: mpi_aint_diff
    end function mpi_aint_diff
    subroutine mpi_address(location, address, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: location
      type(*), dimension(*) :: location
      integer(kind=8) :: address
      integer :: ierror
    end subroutine mpi_address
    subroutine mpi_type_extent(datatype, extent, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: extent
      integer :: ierror
    end subroutine mpi_type_extent
    subroutine mpi_type_lb(datatype, displacement, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: displacement
      integer :: ierror
    end subroutine mpi_type_lb
    subroutine mpi_type_ub(datatype, displacement, ierror)
      import
      type(MPI_Datatype) :: datatype
      integer(kind=8) :: displacement
      integer :: ierror
    end subroutine mpi_type_ub
    subroutine mpi_type_struct(count, array_of_blocklengths, array_of_displacements, &
        array_of_types, newtype, ierror)
      import
      integer :: count
      integer :: array_of_blocklengths(*)
      integer(kind=8) :: array_of_displacements(*)
      type(MPI_Datatype) :: array_of_types(*)
      type(MPI_Datatype) :: newtype
      integer :: ierror
    end subroutine mpi_type_struct
    subroutine mpi_barrier(comm, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_barrier
    subroutine mpi_bcast(buffer, count, datatype, root, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer
      type(*), dimension(*) :: buffer
      integer :: count
      type(MPI_Datatype) :: datatype
      integer :: root
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_bcast
    subroutine mpi_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      integer :: root
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_reduce
    subroutine mpi_allreduce(sendbuf, recvbuf, count, datatype, op, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_allreduce
    subroutine mpi_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_gather
    subroutine mpi_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
        root, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_gatherv
    subroutine mpi_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_scatter
    subroutine mpi_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, &
        root, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      integer :: root
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_scatterv
    subroutine mpi_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_allgather
    subroutine mpi_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
        comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_allgatherv
    subroutine mpi_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_alltoall
    subroutine mpi_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, &
        recvtype, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: sdispls(*)
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: rdispls(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_alltoallv
    subroutine mpi_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_reduce_scatter
    subroutine mpi_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_reduce_scatter_block
    subroutine mpi_scan(sendbuf, recvbuf, count, datatype, op, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_scan
    subroutine mpi_exscan(sendbuf, recvbuf, count, datatype, op, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_exscan
    subroutine mpi_op_create(user_fn, commute, op, ierror)
      import
      external :: user_fn
      logical :: commute
      type(MPI_Op) :: op
      integer :: ierror
    end subroutine mpi_op_create
    subroutine mpi_op_free(op, ierror)
      import
      type(MPI_Op) :: op
      integer :: ierror
    end subroutine mpi_op_free
    subroutine mpi_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, &
        recvtypes, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: sdispls(*)
      type(MPI_Datatype) :: sendtypes(*)
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: rdispls(*)
      type(MPI_Datatype) :: recvtypes(*)
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_alltoallw
    subroutine mpi_reduce_local(inbuf, inoutbuf, count, datatype, op, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
      type(*), dimension(*) :: inbuf
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: inoutbuf
      type(*), dimension(*) :: inoutbuf
      integer :: count
      type(MPI_Datatype) :: datatype
      type(MPI_Op) :: op
      integer :: ierror
    end subroutine mpi_reduce_local
    subroutine mpi_op_commutative(op, commute, ierror)
      import
      type(MPI_Op) :: op
      logical :: commute
      integer :: ierror
    end subroutine mpi_op_commutative
    subroutine mpi_comm_rank(comm, rank, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: rank
      integer :: ierror
    end subroutine mpi_comm_rank
    subroutine mpi_comm_size(comm, size, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: size
      integer :: ierror
    end subroutine mpi_comm_size
    subroutine mpi_comm_dup(comm, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_comm_dup
    subroutine mpi_comm_split(comm, color, key, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: color
      integer :: key
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_comm_split
    subroutine mpi_comm_split_type(comm, split_type, key, info, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: split_type
      integer :: key
      type(MPI_Info) :: info
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_comm_split_type
    subroutine mpi_comm_free(comm, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_comm_free
    subroutine mpi_comm_group(comm, group, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Group) :: group
      integer :: ierror
    end subroutine mpi_comm_group
    subroutine mpi_comm_create(comm, group, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Group) :: group
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_comm_create
    subroutine mpi_comm_create_group(comm, group, tag, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Group) :: group
      integer :: tag
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_comm_create_group
    subroutine mpi_comm_compare(comm1, comm2, result, ierror)
      import
      type(MPI_Comm) :: comm1
      type(MPI_Comm) :: comm2
      integer :: result
      integer :: ierror
    end subroutine mpi_comm_compare
    subroutine mpi_group_incl(group, n, ranks, newgroup, ierror)
      import
      type(MPI_Group) :: group
      integer :: n
      integer :: ranks(*)
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_incl
    subroutine mpi_group_excl(group, n, ranks, newgroup, ierror)
      import
      type(MPI_Group) :: group
      integer :: n
      integer :: ranks(*)
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_excl
    subroutine mpi_group_rank(group, rank, ierror)
      import
      type(MPI_Group) :: group
      integer :: rank
      integer :: ierror
    end subroutine mpi_group_rank
    subroutine mpi_group_size(group, size, ierror)
      import
      type(MPI_Group) :: group
      integer :: size
      integer :: ierror
    end subroutine mpi_group_size
    subroutine mpi_group_free(group, ierror)
      import
      type(MPI_Group) :: group
      integer :: ierror
    end subroutine mpi_group_free
    subroutine mpi_group_range_incl(group, n, ranges, newgroup, ierror)
      import
      type(MPI_Group) :: group
      integer :: n
      integer :: ranges(3,*)
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_range_incl
    subroutine mpi_group_range_excl(group, n, ranges, newgroup, ierror)
      import
      type(MPI_Group) :: group
      integer :: n
      integer :: ranges(3,*)
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_range_excl
    subroutine mpi_group_union(group1, group2, newgroup, ierror)
      import
      type(MPI_Group) :: group1
      type(MPI_Group) :: group2
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_union
    subroutine mpi_group_intersection(group1, group2, newgroup, ierror)
      import
      type(MPI_Group) :: group1
      type(MPI_Group) :: group2
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_intersection
    subroutine mpi_group_difference(group1, group2, newgroup, ierror)
      import
      type(MPI_Group) :: group1
      type(MPI_Group) :: group2
      type(MPI_Group) :: newgroup
      integer :: ierror
    end subroutine mpi_group_difference
    subroutine mpi_group_translate_ranks(group1, n, ranks1, group2, ranks2, ierror)
      import
      type(MPI_Group) :: group1
      integer :: n
      integer :: ranks1(*)
      type(MPI_Group) :: group2
      integer :: ranks2(*)
      integer :: ierror
    end subroutine mpi_group_translate_ranks
    subroutine mpi_group_compare(group1, group2, result, ierror)
      import
      type(MPI_Group) :: group1
      type(MPI_Group) :: group2
      integer :: result
      integer :: ierror
    end subroutine mpi_group_compare
    subroutine mpi_comm_idup(comm, newcomm, request, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Comm) :: newcomm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_comm_idup
    subroutine mpi_comm_dup_with_info(comm, info, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Info) :: info
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_comm_dup_with_info
    subroutine mpi_comm_set_info(comm, info, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Info) :: info
      integer :: ierror
    end subroutine mpi_comm_set_info
    subroutine mpi_comm_get_info(comm, info_used, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Info) :: info_used
      integer :: ierror
    end subroutine mpi_comm_get_info
    subroutine mpi_comm_get_parent(parent, ierror)
      import
      type(MPI_Comm) :: parent
      integer :: ierror
    end subroutine mpi_comm_get_parent
    subroutine mpi_comm_set_name(comm, comm_name, ierror)
      import
      type(MPI_Comm) :: comm
      character(len=*) :: comm_name
      integer :: ierror
    end subroutine mpi_comm_set_name
    subroutine mpi_comm_get_name(comm, comm_name, resultlen, ierror)
      import
      type(MPI_Comm) :: comm
      character(len=*) :: comm_name
      integer :: resultlen
      integer :: ierror
    end subroutine mpi_comm_get_name
    subroutine mpi_comm_create_keyval(comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, &
        extra_state, ierror)
      import
      external :: comm_copy_attr_fn
      external :: comm_delete_attr_fn
      integer :: comm_keyval
      integer(kind=8) :: extra_state
      integer :: ierror
    end subroutine mpi_comm_create_keyval
    subroutine mpi_comm_free_keyval(comm_keyval, ierror)
      import
      integer :: comm_keyval
      integer :: ierror
    end subroutine mpi_comm_free_keyval
    subroutine mpi_comm_set_attr(comm, comm_keyval, attribute_val, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: comm_keyval
      integer(kind=8) :: attribute_val
      integer :: ierror
    end subroutine mpi_comm_set_attr
    subroutine mpi_comm_get_attr(comm, comm_keyval, attribute_val, flag, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: comm_keyval
      integer(kind=8) :: attribute_val
      logical :: flag
      integer :: ierror
    end subroutine mpi_comm_get_attr
    subroutine mpi_comm_delete_attr(comm, comm_keyval, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: comm_keyval
      integer :: ierror
    end subroutine mpi_comm_delete_attr
    subroutine mpi_keyval_free(keyval, ierror)
      import
      integer :: keyval
      integer :: ierror
    end subroutine mpi_keyval_free
    subroutine mpi_attr_delete(comm, keyval, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: keyval
      integer :: ierror
    end subroutine mpi_attr_delete
    subroutine mpi_intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, &
        newintercomm, ierror)
      import
      type(MPI_Comm) :: local_comm
      integer :: local_leader
      type(MPI_Comm) :: peer_comm
      integer :: remote_leader
      integer :: tag
      type(MPI_Comm) :: newintercomm
      integer :: ierror
    end subroutine mpi_intercomm_create
    subroutine mpi_intercomm_merge(intercomm, high, newintracomm, ierror)
      import
      type(MPI_Comm) :: intercomm
      integer :: high
      type(MPI_Comm) :: newintracomm
      integer :: ierror
    end subroutine mpi_intercomm_merge
    subroutine mpi_comm_test_inter(comm, flag, ierror)
      import
      type(MPI_Comm) :: comm
      logical :: flag
      integer :: ierror
    end subroutine mpi_comm_test_inter
    subroutine mpi_comm_remote_size(comm, size, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: size
      integer :: ierror
    end subroutine mpi_comm_remote_size
    subroutine mpi_comm_remote_group(comm, group, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Group) :: group
      integer :: ierror
    end subroutine mpi_comm_remote_group
    subroutine mpi_dims_create(nnodes, ndims, dims, ierror)
      import
      integer :: nnodes
      integer :: ndims
      integer :: dims(*)
      integer :: ierror
    end subroutine mpi_dims_create
    subroutine mpi_cart_create(comm_old, ndims, dims, periods, reorder, comm_cart, ierror)
      import
      type(MPI_Comm) :: comm_old
      integer :: ndims
      integer :: dims(*)
      logical :: periods(*)
      logical :: reorder
      type(MPI_Comm) :: comm_cart
      integer :: ierror
    end subroutine mpi_cart_create
    subroutine mpi_cart_get(comm, maxdims, dims, periods, coords, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: maxdims
      integer :: dims(*)
      logical :: periods(*)
      integer :: coords(*)
      integer :: ierror
    end subroutine mpi_cart_get
    subroutine mpi_cartdim_get(comm, ndims, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: ndims
      integer :: ierror
    end subroutine mpi_cartdim_get
    subroutine mpi_cart_rank(comm, coords, rank, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: coords(*)
      integer :: rank
      integer :: ierror
    end subroutine mpi_cart_rank
    subroutine mpi_cart_coords(comm, rank, maxdims, coords, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: rank
      integer :: maxdims
      integer :: coords(*)
      integer :: ierror
    end subroutine mpi_cart_coords
    subroutine mpi_cart_shift(comm, direction, disp, rank_source, rank_dest, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: direction
      integer :: disp
      integer :: rank_source
      integer :: rank_dest
      integer :: ierror
    end subroutine mpi_cart_shift
    subroutine mpi_cart_sub(comm, remain_dims, newcomm, ierror)
      import
      type(MPI_Comm) :: comm
      logical :: remain_dims(*)
      type(MPI_Comm) :: newcomm
      integer :: ierror
    end subroutine mpi_cart_sub
    subroutine mpi_cart_map(comm, ndims, dims, periods, newrank, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: ndims
      integer :: dims(*)
      logical :: periods(*)
      integer :: newrank
      integer :: ierror
    end subroutine mpi_cart_map
    subroutine mpi_graph_create(comm_old, nnodes, index, edges, reorder, comm_graph, ierror)
      import
      type(MPI_Comm) :: comm_old
      integer :: nnodes
      integer :: index(*)
      integer :: edges(*)
      logical :: reorder
      type(MPI_Comm) :: comm_graph
      integer :: ierror
    end subroutine mpi_graph_create
    subroutine mpi_graphdims_get(comm, nnodes, nedges, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: nnodes
      integer :: nedges
      integer :: ierror
    end subroutine mpi_graphdims_get
    subroutine mpi_graph_get(comm, maxindex, maxedges, index, edges, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: maxindex
      integer :: maxedges
      integer :: index(*)
      integer :: edges(*)
      integer :: ierror
    end subroutine mpi_graph_get
    subroutine mpi_graph_neighbors_count(comm, rank, nneighbors, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: rank
      integer :: nneighbors
      integer :: ierror
    end subroutine mpi_graph_neighbors_count
    subroutine mpi_graph_neighbors(comm, rank, maxneighbors, neighbors, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: rank
      integer :: maxneighbors
      integer :: neighbors(*)
      integer :: ierror
    end subroutine mpi_graph_neighbors
    subroutine mpi_graph_map(comm, nnodes, index, edges, newrank, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: nnodes
      integer :: index(*)
      integer :: edges(*)
      integer :: newrank
      integer :: ierror
    end subroutine mpi_graph_map
    subroutine mpi_dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info, &
        reorder, comm_dist_graph, ierror)
      import
      type(MPI_Comm) :: comm_old
      integer :: n
      integer :: sources(*)
      integer :: degrees(*)
      integer :: destinations(*)
      integer :: weights(*)
      type(MPI_Info) :: info
      logical :: reorder
      type(MPI_Comm) :: comm_dist_graph
      integer :: ierror
    end subroutine mpi_dist_graph_create
    subroutine mpi_dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, &
        outdegree, destinations, destweights, info, reorder, comm_dist_graph, ierror)
      import
      type(MPI_Comm) :: comm_old
      integer :: indegree
      integer :: sources(*)
      integer :: sourceweights(*)
      integer :: outdegree
      integer :: destinations(*)
      integer :: destweights(*)
      type(MPI_Info) :: info
      logical :: reorder
      type(MPI_Comm) :: comm_dist_graph
      integer :: ierror
    end subroutine mpi_dist_graph_create_adjacent
    subroutine mpi_dist_graph_neighbors_count(comm, indegree, outdegree, weighted, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: indegree
      integer :: outdegree
      logical :: weighted
      integer :: ierror
    end subroutine mpi_dist_graph_neighbors_count
    subroutine mpi_dist_graph_neighbors(comm, maxindegree, sources, sourceweights, maxoutdegree, &
        destinations, destweights, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: maxindegree
      integer :: sources(*)
      integer :: sourceweights(*)
      integer :: maxoutdegree
      integer :: destinations(*)
      integer :: destweights(*)
      integer :: ierror
    end subroutine mpi_dist_graph_neighbors
    subroutine mpi_topo_test(comm, status, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: status
      integer :: ierror
    end subroutine mpi_topo_test
    subroutine mpi_neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
        comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_neighbor_allgather
    subroutine mpi_neighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, &
        recvtype, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_neighbor_allgatherv
    subroutine mpi_neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
        comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_neighbor_alltoall
    subroutine mpi_neighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, &
        rdispls, recvtype, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: sdispls(*)
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: rdispls(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_neighbor_alltoallv
    subroutine mpi_neighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, &
        rdispls, recvtypes, comm, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer(kind=8) :: sdispls(*)
      type(MPI_Datatype) :: sendtypes(*)
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer(kind=8) :: rdispls(*)
      type(MPI_Datatype) :: recvtypes(*)
      type(MPI_Comm) :: comm
      integer :: ierror
    end subroutine mpi_neighbor_alltoallw
    subroutine mpi_ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
        comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ineighbor_allgather
    subroutine mpi_ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, &
        recvtype, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: displs(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ineighbor_allgatherv
    subroutine mpi_ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
        comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcount
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcount
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ineighbor_alltoall
    subroutine mpi_ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, &
        rdispls, recvtype, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer :: sdispls(*)
      type(MPI_Datatype) :: sendtype
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer :: rdispls(*)
      type(MPI_Datatype) :: recvtype
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ineighbor_alltoallv
    subroutine mpi_ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, &
        recvcounts, rdispls, recvtypes, comm, request, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
      type(*), dimension(*) :: sendbuf
      integer :: sendcounts(*)
      integer(kind=8) :: sdispls(*)
      type(MPI_Datatype) :: sendtypes(*)
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
      type(*), dimension(*) :: recvbuf
      integer :: recvcounts(*)
      integer(kind=8) :: rdispls(*)
      type(MPI_Datatype) :: recvtypes(*)
      type(MPI_Comm) :: comm
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_ineighbor_alltoallw
    subroutine mpi_init(ierror)
      import
      integer :: ierror
    end subroutine mpi_init
    subroutine mpi_init_thread(required, provided, ierror)
      import
      integer :: required
      integer :: provided
      integer :: ierror
    end subroutine mpi_init_thread
    subroutine mpi_query_thread(provided, ierror)
      import
      integer :: provided
      integer :: ierror
    end subroutine mpi_query_thread
    subroutine mpi_initialized(flag, ierror)
      import
      logical :: flag
      integer :: ierror
    end subroutine mpi_initialized
    subroutine mpi_finalize(ierror)
      import
      integer :: ierror
    end subroutine mpi_finalize
    subroutine mpi_finalized(flag, ierror)
      import
      logical :: flag
      integer :: ierror
    end subroutine mpi_finalized
    subroutine mpi_abort(comm, errorcode, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: errorcode
      integer :: ierror
    end subroutine mpi_abort
    function mpi_wtime()
      import
      double precision :: mpi_wtime
    end function mpi_wtime
    function mpi_wtick()
      import
      double precision :: mpi_wtick
    end function mpi_wtick
    subroutine mpi_get_processor_name(name, resultlen, ierror)
      import
      character(len=*) :: name
      integer :: resultlen
      integer :: ierror
    end subroutine mpi_get_processor_name
    subroutine mpi_get_version(version, subversion, ierror)
      import
      integer :: version
      integer :: subversion
      integer :: ierror
    end subroutine mpi_get_version
    subroutine mpi_error_string(errorcode, string, resultlen, ierror)
      import
      integer :: errorcode
      character(len=*) :: string
      integer :: resultlen
      integer :: ierror
    end subroutine mpi_error_string
    subroutine mpi_error_class(errorcode, errorclass, ierror)
      import
      integer :: errorcode
      integer :: errorclass
      integer :: ierror
    end subroutine mpi_error_class
    subroutine mpi_comm_set_errhandler(comm, errhandler, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_comm_set_errhandler
    subroutine mpi_comm_get_errhandler(comm, errhandler, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_comm_get_errhandler
    subroutine mpi_comm_create_errhandler(comm_errhandler_fn, errhandler, ierror)
      import
      external :: comm_errhandler_fn
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_comm_create_errhandler
    subroutine mpi_comm_call_errhandler(comm, errorcode, ierror)
      import
      type(MPI_Comm) :: comm
      integer :: errorcode
      integer :: ierror
    end subroutine mpi_comm_call_errhandler
    subroutine mpi_errhandler_free(errhandler, ierror)
      import
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_errhandler_free
    subroutine mpi_errhandler_create(function, errhandler, ierror)
      import
      external :: function
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_errhandler_create
    subroutine mpi_errhandler_set(comm, errhandler, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_errhandler_set
    subroutine mpi_errhandler_get(comm, errhandler, ierror)
      import
      type(MPI_Comm) :: comm
      type(MPI_Errhandler) :: errhandler
      integer :: ierror
    end subroutine mpi_errhandler_get
    subroutine mpi_add_error_class(errorclass, ierror)
      import
      integer :: errorclass
      integer :: ierror
    end subroutine mpi_add_error_class
    subroutine mpi_add_error_code(errorclass, errorcode, ierror)
      import
      integer :: errorclass
      integer :: errorcode
      integer :: ierror
    end subroutine mpi_add_error_code
    subroutine mpi_add_error_string(errorcode, string, ierror)
      import
      integer :: errorcode
      character(len=*) :: string
      integer :: ierror
    end subroutine mpi_add_error_string
    subroutine mpi_get_library_version(version, resultlen, ierror)
      import
      character(len=*) :: version
      integer :: resultlen
      integer :: ierror
    end subroutine mpi_get_library_version
    subroutine mpi_alloc_mem(size, info, baseptr, ierror)
      import
      integer(kind=8) :: size
      type(MPI_Info) :: info
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: baseptr
      type(*), dimension(*) :: baseptr
      integer :: ierror
    end subroutine mpi_alloc_mem
    subroutine mpi_free_mem(base, ierror)
      import
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: base
      type(*), dimension(*) :: base
      integer :: ierror
    end subroutine mpi_free_mem
    subroutine mpi_is_thread_main(flag, ierror)
      import
      logical :: flag
      integer :: ierror
    end subroutine mpi_is_thread_main
    subroutine mpi_info_create(info, ierror)
      import
      type(MPI_Info) :: info
      integer :: ierror
    end subroutine mpi_info_create
    subroutine mpi_info_set(info, key, value, ierror)
      import
      type(MPI_Info) :: info
      character(len=*) :: key
      character(len=*) :: value
      integer :: ierror
    end subroutine mpi_info_set
    subroutine mpi_info_get(info, key, valuelen, value, flag, ierror)
      import
      type(MPI_Info) :: info
      character(len=*) :: key
      integer :: valuelen
      character(len=*) :: value
      logical :: flag
      integer :: ierror
    end subroutine mpi_info_get
    subroutine mpi_info_get_valuelen(info, key, valuelen, flag, ierror)
      import
      type(MPI_Info) :: info
      character(len=*) :: key
      integer :: valuelen
      logical :: flag
      integer :: ierror
    end subroutine mpi_info_get_valuelen
    subroutine mpi_info_get_nkeys(info, nkeys, ierror)
      import
      type(MPI_Info) :: info
      integer :: nkeys
      integer :: ierror
    end subroutine mpi_info_get_nkeys
    subroutine mpi_info_get_nthkey(info, n, key, ierror)
      import
      type(MPI_Info) :: info
      integer :: n
      character(len=*) :: key
      integer :: ierror
    end subroutine mpi_info_get_nthkey
    subroutine mpi_info_delete(info, key, ierror)
      import
      type(MPI_Info) :: info
      character(len=*) :: key
      integer :: ierror
    end subroutine mpi_info_delete
    subroutine mpi_info_dup(info, newinfo, ierror)
      import
      type(MPI_Info) :: info
      type(MPI_Info) :: newinfo
      integer :: ierror
    end subroutine mpi_info_dup
    subroutine mpi_info_free(info, ierror)
      import
      type(MPI_Info) :: info
      integer :: ierror
    end subroutine mpi_info_free
    subroutine mpi_grequest_complete(request, ierror)
      import
      type(MPI_Request) :: request
      integer :: ierror
    end subroutine mpi_grequest_complete
  end interface
end module qcg_mpi_f08_bindings

module mpi_f08
  use qcg_mpi_f08_types
  use qcg_mpi_f08_bindings, only: qcg_send => mpi_send
  use qcg_mpi_f08_bindings, only: qcg_ssend => mpi_ssend
  use qcg_mpi_f08_bindings, only: qcg_recv => mpi_recv
  use qcg_mpi_f08_bindings, only: qcg_isend => mpi_isend
  use qcg_mpi_f08_bindings, only: qcg_irecv => mpi_irecv
  use qcg_mpi_f08_bindings, only: qcg_sendrecv => mpi_sendrecv
  use qcg_mpi_f08_bindings, only: qcg_sendrecv_replace => mpi_sendrecv_replace
  use qcg_mpi_f08_bindings, only: qcg_wait => mpi_wait
  use qcg_mpi_f08_bindings, only: qcg_waitall => mpi_waitall
  use qcg_mpi_f08_bindings, only: qcg_waitany => mpi_waitany
  use qcg_mpi_f08_bindings, only: qcg_waitsome => mpi_waitsome
  use qcg_mpi_f08_bindings, only: qcg_test => mpi_test
  use qcg_mpi_f08_bindings, only: qcg_testall => mpi_testall
  use qcg_mpi_f08_bindings, only: qcg_testany => mpi_testany
  use qcg_mpi_f08_bindings, only: qcg_probe => mpi_probe
  use qcg_mpi_f08_bindings, only: qcg_iprobe => mpi_iprobe
  use qcg_mpi_f08_bindings, only: qcg_get_count => mpi_get_count
  use qcg_mpi_f08_bindings, only: qcg_cancel => mpi_cancel
  use qcg_mpi_f08_bindings, only: qcg_test_cancelled => mpi_test_cancelled
  use qcg_mpi_f08_bindings, only: qcg_request_free => mpi_request_free
  use qcg_mpi_f08_bindings, only: qcg_bsend => mpi_bsend
  use qcg_mpi_f08_bindings, only: qcg_rsend => mpi_rsend
  use qcg_mpi_f08_bindings, only: qcg_ibsend => mpi_ibsend
  use qcg_mpi_f08_bindings, only: qcg_issend => mpi_issend
  use qcg_mpi_f08_bindings, only: qcg_irsend => mpi_irsend
  use qcg_mpi_f08_bindings, only: qcg_buffer_attach => mpi_buffer_attach
  use qcg_mpi_f08_bindings, only: qcg_buffer_detach => mpi_buffer_detach
  use qcg_mpi_f08_bindings, only: qcg_send_init => mpi_send_init
  use qcg_mpi_f08_bindings, only: qcg_bsend_init => mpi_bsend_init
  use qcg_mpi_f08_bindings, only: qcg_ssend_init => mpi_ssend_init
  use qcg_mpi_f08_bindings, only: qcg_rsend_init => mpi_rsend_init
  use qcg_mpi_f08_bindings, only: qcg_recv_init => mpi_recv_init
  use qcg_mpi_f08_bindings, only: qcg_start => mpi_start
  use qcg_mpi_f08_bindings, only: qcg_startall => mpi_startall
  use qcg_mpi_f08_bindings, only: qcg_mprobe => mpi_mprobe
  use qcg_mpi_f08_bindings, only: qcg_improbe => mpi_improbe
  use qcg_mpi_f08_bindings, only: qcg_mrecv => mpi_mrecv
  use qcg_mpi_f08_bindings, only: qcg_imrecv => mpi_imrecv
  use qcg_mpi_f08_bindings, only: qcg_testsome => mpi_testsome
  use qcg_mpi_f08_bindings, only: qcg_request_get_status => mpi_request_get_status
  use qcg_mpi_f08_bindings, only: qcg_status_set_elements => mpi_status_set_elements
  use qcg_mpi_f08_bindings, only: qcg_status_set_elements_x => mpi_status_set_elements_x
  use qcg_mpi_f08_bindings, only: qcg_status_set_cancelled => mpi_status_set_cancelled
  use qcg_mpi_f08_bindings, only: qcg_ibarrier => mpi_ibarrier
  use qcg_mpi_f08_bindings, only: qcg_ibcast => mpi_ibcast
  use qcg_mpi_f08_bindings, only: qcg_ireduce => mpi_ireduce
  use qcg_mpi_f08_bindings, only: qcg_iallreduce => mpi_iallreduce
  use qcg_mpi_f08_bindings, only: qcg_igather => mpi_igather
  use qcg_mpi_f08_bindings, only: qcg_igatherv => mpi_igatherv
  use qcg_mpi_f08_bindings, only: qcg_iscatter => mpi_iscatter
  use qcg_mpi_f08_bindings, only: qcg_iscatterv => mpi_iscatterv
  use qcg_mpi_f08_bindings, only: qcg_iallgather => mpi_iallgather
  use qcg_mpi_f08_bindings, only: qcg_iallgatherv => mpi_iallgatherv
  use qcg_mpi_f08_bindings, only: qcg_ialltoall => mpi_ialltoall
  use qcg_mpi_f08_bindings, only: qcg_ialltoallv => mpi_ialltoallv
  use qcg_mpi_f08_bindings, only: qcg_ialltoallw => mpi_ialltoallw
  use qcg_mpi_f08_bindings, only: qcg_ireduce_scatter => mpi_ireduce_scatter
  use qcg_mpi_f08_bindings, only: qcg_ireduce_scatter_block => mpi_ireduce_scatter_block
  use qcg_mpi_f08_bindings, only: qcg_iscan => mpi_iscan
  use qcg_mpi_f08_bindings, only: qcg_iexscan => mpi_iexscan
  use qcg_mpi_f08_bindings, only: qcg_type_size => mpi_type_size
  use qcg_mpi_f08_bindings, only: qcg_type_get_extent => mpi_type_get_extent
  use qcg_mpi_f08_bindings, only: qcg_type_contiguous => mpi_type_contiguous
  use qcg_mpi_f08_bindings, only: qcg_type_vector => mpi_type_vector
  use qcg_mpi_f08_bindings, only: qcg_type_create_struct => mpi_type_create_struct
  use qcg_mpi_f08_bindings, only: qcg_type_commit => mpi_type_commit
  use qcg_mpi_f08_bindings, only: qcg_type_free => mpi_type_free
  use qcg_mpi_f08_bindings, only: qcg_type_set_name => mpi_type_set_name
  use qcg_mpi_f08_bindings, only: qcg_type_get_name => mpi_type_get_name
  use qcg_mpi_f08_bindings, only: qcg_type_create_keyval => mpi_type_create_keyval
  use qcg_mpi_f08_bindings, only: qcg_type_free_keyval => mpi_type_free_keyval
  use qcg_mpi_f08_bindings, only: qcg_type_set_attr => mpi_type_set_attr
  use qcg_mpi_f08_bindings, only: qcg_type_get_attr => mpi_type_get_attr
  use qcg_mpi_f08_bindings, only: qcg_type_delete_attr => mpi_type_delete_attr
  use qcg_mpi_f08_bindings, only: qcg_type_size_x => mpi_type_size_x
  use qcg_mpi_f08_bindings, only: qcg_type_get_extent_x => mpi_type_get_extent_x
  use qcg_mpi_f08_bindings, only: qcg_type_get_true_extent => mpi_type_get_true_extent
  use qcg_mpi_f08_bindings, only: qcg_type_get_true_extent_x => mpi_type_get_true_extent_x
  use qcg_mpi_f08_bindings, only: qcg_type_create_hvector => mpi_type_create_hvector
  use qcg_mpi_f08_bindings, only: qcg_type_indexed => mpi_type_indexed
  use qcg_mpi_f08_bindings, only: qcg_type_create_hindexed => mpi_type_create_hindexed
  use qcg_mpi_f08_bindings, only: qcg_type_create_indexed_block => mpi_type_create_indexed_block
  use qcg_mpi_f08_bindings, only: qcg_type_create_hindexed_block => mpi_type_create_hindexed_block
  use qcg_mpi_f08_bindings, only: qcg_type_create_subarray => mpi_type_create_subarray
  use qcg_mpi_f08_bindings, only: qcg_type_create_darray => mpi_type_create_darray
  use qcg_mpi_f08_bindings, only: qcg_type_create_resized => mpi_type_create_resized
  use qcg_mpi_f08_bindings, only: qcg_type_dup => mpi_type_dup
  use qcg_mpi_f08_bindings, only: qcg_type_match_size => mpi_type_match_size
  use qcg_mpi_f08_bindings, only: qcg_type_get_envelope => mpi_type_get_envelope
  use qcg_mpi_f08_bindings, only: qcg_type_get_contents => mpi_type_get_contents
  use qcg_mpi_f08_bindings, only: qcg_get_elements => mpi_get_elements
  use qcg_mpi_f08_bindings, only: qcg_get_elements_x => mpi_get_elements_x
  use qcg_mpi_f08_bindings, only: qcg_get_address => mpi_get_address
  use qcg_mpi_f08_bindings, only: qcg_pack => mpi_pack
  use qcg_mpi_f08_bindings, only: qcg_unpack => mpi_unpack
  use qcg_mpi_f08_bindings, only: qcg_pack_size => mpi_pack_size
  use qcg_mpi_f08_bindings, only: qcg_pack_external => mpi_pack_external
  use qcg_mpi_f08_bindings, only: qcg_unpack_external => mpi_unpack_external
  use qcg_mpi_f08_bindings, only: qcg_pack_external_size => mpi_pack_external_size
  use qcg_mpi_f08_bindings, only: qcg_type_hvector => mpi_type_hvector
  use qcg_mpi_f08_bindings, only: qcg_type_hindexed => mpi_type_hindexed
  use qcg_mpi_f08_bindings, only: qcg_aint_add => mpi_aint_add
  use qcg_mpi_f08_bindings, only: qcg_aint_diff => mpi_aint_diff
  use qcg_mpi_f08_bindings, only: qcg_address => mpi_address
  use qcg_mpi_f08_bindings, only: qcg_type_extent => mpi_type_extent
  use qcg_mpi_f08_bindings, only: qcg_type_lb => mpi_type_lb
  use qcg_mpi_f08_bindings, only: qcg_type_ub => mpi_type_ub
  use qcg_mpi_f08_bindings, only: qcg_type_struct => mpi_type_struct
  use qcg_mpi_f08_bindings, only: qcg_barrier => mpi_barrier
  use qcg_mpi_f08_bindings, only: qcg_bcast => mpi_bcast
  use qcg_mpi_f08_bindings, only: qcg_reduce => mpi_reduce
  use qcg_mpi_f08_bindings, only: qcg_allreduce => mpi_allreduce
  use qcg_mpi_f08_bindings, only: qcg_gather => mpi_gather
  use qcg_mpi_f08_bindings, only: qcg_gatherv => mpi_gatherv
  use qcg_mpi_f08_bindings, only: qcg_scatter => mpi_scatter
  use qcg_mpi_f08_bindings, only: qcg_scatterv => mpi_scatterv
  use qcg_mpi_f08_bindings, only: qcg_allgather => mpi_allgather
  use qcg_mpi_f08_bindings, only: qcg_allgatherv => mpi_allgatherv
  use qcg_mpi_f08_bindings, only: qcg_alltoall => mpi_alltoall
  use qcg_mpi_f08_bindings, only: qcg_alltoallv => mpi_alltoallv
  use qcg_mpi_f08_bindings, only: qcg_reduce_scatter => mpi_reduce_scatter
  use qcg_mpi_f08_bindings, only: qcg_reduce_scatter_block => mpi_reduce_scatter_block
  use qcg_mpi_f08_bindings, only: qcg_scan => mpi_scan
  use qcg_mpi_f08_bindings, only: qcg_exscan => mpi_exscan
  use qcg_mpi_f08_bindings, only: qcg_op_create => mpi_op_create
  use qcg_mpi_f08_bindings, only: qcg_op_free => mpi_op_free
  use qcg_mpi_f08_bindings, only: qcg_alltoallw => mpi_alltoallw
  use qcg_mpi_f08_bindings, only: qcg_reduce_local => mpi_reduce_local
  use qcg_mpi_f08_bindings, only: qcg_op_commutative => mpi_op_commutative
  use qcg_mpi_f08_bindings, only: qcg_comm_rank => mpi_comm_rank
  use qcg_mpi_f08_bindings, only: qcg_comm_size => mpi_comm_size
  use qcg_mpi_f08_bindings, only: qcg_comm_dup => mpi_comm_dup
  use qcg_mpi_f08_bindings, only: qcg_comm_split => mpi_comm_split
  use qcg_mpi_f08_bindings, only: qcg_comm_split_type => mpi_comm_split_type
  use qcg_mpi_f08_bindings, only: qcg_comm_free => mpi_comm_free
  use qcg_mpi_f08_bindings, only: qcg_comm_group => mpi_comm_group
  use qcg_mpi_f08_bindings, only: qcg_comm_create => mpi_comm_create
  use qcg_mpi_f08_bindings, only: qcg_comm_create_group => mpi_comm_create_group
  use qcg_mpi_f08_bindings, only: qcg_comm_compare => mpi_comm_compare
  use qcg_mpi_f08_bindings, only: qcg_group_incl => mpi_group_incl
  use qcg_mpi_f08_bindings, only: qcg_group_excl => mpi_group_excl
  use qcg_mpi_f08_bindings, only: qcg_group_rank => mpi_group_rank
  use qcg_mpi_f08_bindings, only: qcg_group_size => mpi_group_size
  use qcg_mpi_f08_bindings, only: qcg_group_free => mpi_group_free
  use qcg_mpi_f08_bindings, only: qcg_group_range_incl => mpi_group_range_incl
  use qcg_mpi_f08_bindings, only: qcg_group_range_excl => mpi_group_range_excl
  use qcg_mpi_f08_bindings, only: qcg_group_union => mpi_group_union
  use qcg_mpi_f08_bindings, only: qcg_group_intersection => mpi_group_intersection
  use qcg_mpi_f08_bindings, only: qcg_group_difference => mpi_group_difference
  use qcg_mpi_f08_bindings, only: qcg_group_translate_ranks => mpi_group_translate_ranks
  use qcg_mpi_f08_bindings, only: qcg_group_compare => mpi_group_compare
  use qcg_mpi_f08_bindings, only: qcg_comm_idup => mpi_comm_idup
  use qcg_mpi_f08_bindings, only: qcg_comm_dup_with_info => mpi_comm_dup_with_info
  use qcg_mpi_f08_bindings, only: qcg_comm_set_info => mpi_comm_set_info
  use qcg_mpi_f08_bindings, only: qcg_comm_get_info => mpi_comm_get_info
  use qcg_mpi_f08_bindings, only: qcg_comm_get_parent => mpi_comm_get_parent
  use qcg_mpi_f08_bindings, only: qcg_comm_set_name => mpi_comm_set_name
  use qcg_mpi_f08_bindings, only: qcg_comm_get_name => mpi_comm_get_name
  use qcg_mpi_f08_bindings, only: qcg_comm_create_keyval => mpi_comm_create_keyval
  use qcg_mpi_f08_bindings, only: qcg_comm_free_keyval => mpi_comm_free_keyval
  use qcg_mpi_f08_bindings, only: qcg_comm_set_attr => mpi_comm_set_attr
  use qcg_mpi_f08_bindings, only: qcg_comm_get_attr => mpi_comm_get_attr
  use qcg_mpi_f08_bindings, only: qcg_comm_delete_attr => mpi_comm_delete_attr
  use qcg_mpi_f08_bindings, only: qcg_keyval_free => mpi_keyval_free
  use qcg_mpi_f08_bindings, only: qcg_attr_delete => mpi_attr_delete
  use qcg_mpi_f08_bindings, only: qcg_intercomm_create => mpi_intercomm_create
  use qcg_mpi_f08_bindings, only: qcg_intercomm_merge => mpi_intercomm_merge
  use qcg_mpi_f08_bindings, only: qcg_comm_test_inter => mpi_comm_test_inter
  use qcg_mpi_f08_bindings, only: qcg_comm_remote_size => mpi_comm_remote_size
  use qcg_mpi_f08_bindings, only: qcg_comm_remote_group => mpi_comm_remote_group
  use qcg_mpi_f08_bindings, only: qcg_dims_create => mpi_dims_create
  use qcg_mpi_f08_bindings, only: qcg_cart_create => mpi_cart_create
  use qcg_mpi_f08_bindings, only: qcg_cart_get => mpi_cart_get
  use qcg_mpi_f08_bindings, only: qcg_cartdim_get => mpi_cartdim_get
  use qcg_mpi_f08_bindings, only: qcg_cart_rank => mpi_cart_rank
  use qcg_mpi_f08_bindings, only: qcg_cart_coords => mpi_cart_coords
  use qcg_mpi_f08_bindings, only: qcg_cart_shift => mpi_cart_shift
  use qcg_mpi_f08_bindings, only: qcg_cart_sub => mpi_cart_sub
  use qcg_mpi_f08_bindings, only: qcg_cart_map => mpi_cart_map
  use qcg_mpi_f08_bindings, only: qcg_graph_create => mpi_graph_create
  use qcg_mpi_f08_bindings, only: qcg_graphdims_get => mpi_graphdims_get
  use qcg_mpi_f08_bindings, only: qcg_graph_get => mpi_graph_get
  use qcg_mpi_f08_bindings, only: qcg_graph_neighbors_count => mpi_graph_neighbors_count
  use qcg_mpi_f08_bindings, only: qcg_graph_neighbors => mpi_graph_neighbors
  use qcg_mpi_f08_bindings, only: qcg_graph_map => mpi_graph_map
  use qcg_mpi_f08_bindings, only: qcg_dist_graph_create => mpi_dist_graph_create
  use qcg_mpi_f08_bindings, only: qcg_dist_graph_create_adjacent => mpi_dist_graph_create_adjacent
  use qcg_mpi_f08_bindings, only: qcg_dist_graph_neighbors_count => mpi_dist_graph_neighbors_count
  use qcg_mpi_f08_bindings, only: qcg_dist_graph_neighbors => mpi_dist_graph_neighbors
  use qcg_mpi_f08_bindings, only: qcg_topo_test => mpi_topo_test
  use qcg_mpi_f08_bindings, only: qcg_neighbor_allgather => mpi_neighbor_allgather
  use qcg_mpi_f08_bindings, only: qcg_neighbor_allgatherv => mpi_neighbor_allgatherv
  use qcg_mpi_f08_bindings, only: qcg_neighbor_alltoall => mpi_neighbor_alltoall
  use qcg_mpi_f08_bindings, only: qcg_neighbor_alltoallv => mpi_neighbor_alltoallv
  use qcg_mpi_f08_bindings, only: qcg_neighbor_alltoallw => mpi_neighbor_alltoallw
  use qcg_mpi_f08_bindings, only: qcg_ineighbor_allgather => mpi_ineighbor_allgather
  use qcg_mpi_f08_bindings, only: qcg_ineighbor_allgatherv => mpi_ineighbor_allgatherv
  use qcg_mpi_f08_bindings, only: qcg_ineighbor_alltoall => mpi_ineighbor_alltoall
  use qcg_mpi_f08_bindings, only: qcg_ineighbor_alltoallv => mpi_ineighbor_alltoallv
  use qcg_mpi_f08_bindings, only: qcg_ineighbor_alltoallw => mpi_ineighbor_alltoallw
  use qcg_mpi_f08_bindings, only: qcg_init => mpi_init
  use qcg_mpi_f08_bindings, only: qcg_init_thread => mpi_init_thread
  use qcg_mpi_f08_bindings, only: qcg_query_thread => mpi_query_thread
  use qcg_mpi_f08_bindings, only: qcg_initialized => mpi_initialized
  use qcg_mpi_f08_bindings, only: qcg_finalize => mpi_finalize
  use qcg_mpi_f08_bindings, only: qcg_finalized => mpi_finalized
  use qcg_mpi_f08_bindings, only: qcg_abort => mpi_abort
  use qcg_mpi_f08_bindings, only: qcg_wtime => mpi_wtime
  use qcg_mpi_f08_bindings, only: qcg_wtick => mpi_wtick
  use qcg_mpi_f08_bindings, only: qcg_get_processor_name => mpi_get_processor_name
  use qcg_mpi_f08_bindings, only: qcg_get_version => mpi_get_version
  use qcg_mpi_f08_bindings, only: qcg_error_string => mpi_error_string
  use qcg_mpi_f08_bindings, only: qcg_error_class => mpi_error_class
  use qcg_mpi_f08_bindings, only: qcg_comm_set_errhandler => mpi_comm_set_errhandler
  use qcg_mpi_f08_bindings, only: qcg_comm_get_errhandler => mpi_comm_get_errhandler
  use qcg_mpi_f08_bindings, only: qcg_comm_create_errhandler => mpi_comm_create_errhandler
  use qcg_mpi_f08_bindings, only: qcg_comm_call_errhandler => mpi_comm_call_errhandler
  use qcg_mpi_f08_bindings, only: qcg_errhandler_free => mpi_errhandler_free
  use qcg_mpi_f08_bindings, only: qcg_errhandler_create => mpi_errhandler_create
  use qcg_mpi_f08_bindings, only: qcg_errhandler_set => mpi_errhandler_set
  use qcg_mpi_f08_bindings, only: qcg_errhandler_get => mpi_errhandler_get
  use qcg_mpi_f08_bindings, only: qcg_add_error_class => mpi_add_error_class
  use qcg_mpi_f08_bindings, only: qcg_add_error_code => mpi_add_error_code
  use qcg_mpi_f08_bindings, only: qcg_add_error_string => mpi_add_error_string
  use qcg_mpi_f08_bindings, only: qcg_get_library_version => mpi_get_library_version
  use qcg_mpi_f08_bindings, only: qcg_alloc_mem => mpi_alloc_mem
  use qcg_mpi_f08_bindings, only: qcg_free_mem => mpi_free_mem
  use qcg_mpi_f08_bindings, only: qcg_is_thread_main => mpi_is_thread_main
  use qcg_mpi_f08_bindings, only: qcg_info_create => mpi_info_create
  use qcg_mpi_f08_bindings, only: qcg_info_set => mpi_info_set
  use qcg_mpi_f08_bindings, only: qcg_info_get => mpi_info_get
  use qcg_mpi_f08_bindings, only: qcg_info_get_valuelen => mpi_info_get_valuelen
  use qcg_mpi_f08_bindings, only: qcg_info_get_nkeys => mpi_info_get_nkeys
  use qcg_mpi_f08_bindings, only: qcg_info_get_nthkey => mpi_info_get_nthkey
  use qcg_mpi_f08_bindings, only: qcg_info_delete => mpi_info_delete
  use qcg_mpi_f08_bindings, only: qcg_info_dup => mpi_info_dup
  use qcg_mpi_f08_bindings, only: qcg_info_free => mpi_info_free
  use qcg_mpi_f08_bindings, only: qcg_grequest_complete => mpi_grequest_complete
  implicit none
  integer, parameter :: MPI_STATUS_SIZE = 6
  integer, parameter :: MPI_ADDRESS_KIND = 8
  integer, parameter :: MPI_OFFSET_KIND = 8
  integer, parameter :: MPI_COUNT_KIND = 8
  integer, parameter :: MPI_INTEGER_KIND = 4
  integer, parameter :: MPI_VERSION = 3
  integer, parameter :: MPI_SUBVERSION = 1
  integer, parameter :: MPI_ANY_SOURCE = -2
  integer, parameter :: MPI_PROC_NULL = -1
  integer, parameter :: MPI_ROOT = -3
  integer, parameter :: MPI_ANY_TAG = -1
  integer, parameter :: MPI_UNDEFINED = -32766
  integer, parameter :: MPI_MAX_PROCESSOR_NAME = 256
  integer, parameter :: MPI_MAX_ERROR_STRING = 512
  integer, parameter :: MPI_THREAD_SINGLE = 0
  integer, parameter :: MPI_THREAD_FUNNELED = 1
  integer, parameter :: MPI_THREAD_SERIALIZED = 2
  integer, parameter :: MPI_THREAD_MULTIPLE = 3
  type(MPI_Comm), parameter :: MPI_COMM_NULL = MPI_Comm(0)
  type(MPI_Comm), parameter :: MPI_COMM_WORLD = MPI_Comm(1)
  type(MPI_Comm), parameter :: MPI_COMM_SELF = MPI_Comm(2)
  type(MPI_Group), parameter :: MPI_GROUP_NULL = MPI_Group(0)
  type(MPI_Group), parameter :: MPI_GROUP_EMPTY = MPI_Group(1)
  type(MPI_Request), parameter :: MPI_REQUEST_NULL = MPI_Request(0)
  type(MPI_Errhandler), parameter :: MPI_ERRHANDLER_NULL = MPI_Errhandler(0)
  type(MPI_Errhandler), parameter :: MPI_ERRORS_ARE_FATAL = MPI_Errhandler(1)
  type(MPI_Errhandler), parameter :: MPI_ERRORS_RETURN = MPI_Errhandler(2)
  type(MPI_Info), parameter :: MPI_INFO_NULL = MPI_Info(0)
  type(MPI_Message), parameter :: MPI_MESSAGE_NULL = MPI_Message(0)
  type(MPI_Message), parameter :: MPI_MESSAGE_NO_PROC = MPI_Message(1)
  integer, parameter :: MPI_BSEND_OVERHEAD = 64
  integer, parameter :: MPI_IDENT = 0
  integer, parameter :: MPI_CONGRUENT = 1
  integer, parameter :: MPI_SIMILAR = 2
  integer, parameter :: MPI_UNEQUAL = 3
  integer, parameter :: MPI_GRAPH = 1
  integer, parameter :: MPI_CART = 2
  integer, parameter :: MPI_DIST_GRAPH = 3
  integer, parameter :: MPI_COMM_TYPE_SHARED = 1
  integer, parameter :: QCG_LEVEL_SITE = 0
  integer, parameter :: QCG_LEVEL_NODE = 1
  type(MPI_Datatype), parameter :: MPI_DATATYPE_NULL = MPI_Datatype(0)
  type(MPI_Datatype), parameter :: MPI_CHAR = MPI_Datatype(1)
  type(MPI_Datatype), parameter :: MPI_SIGNED_CHAR = MPI_Datatype(2)
  type(MPI_Datatype), parameter :: MPI_UNSIGNED_CHAR = MPI_Datatype(3)
  type(MPI_Datatype), parameter :: MPI_BYTE = MPI_Datatype(4)
  type(MPI_Datatype), parameter :: MPI_SHORT = MPI_Datatype(5)
  type(MPI_Datatype), parameter :: MPI_UNSIGNED_SHORT = MPI_Datatype(6)
  type(MPI_Datatype), parameter :: MPI_INT = MPI_Datatype(7)
  type(MPI_Datatype), parameter :: MPI_UNSIGNED = MPI_Datatype(8)
  type(MPI_Datatype), parameter :: MPI_LONG = MPI_Datatype(9)
  type(MPI_Datatype), parameter :: MPI_UNSIGNED_LONG = MPI_Datatype(10)
  type(MPI_Datatype), parameter :: MPI_LONG_LONG_INT = MPI_Datatype(11)
  type(MPI_Datatype), parameter :: MPI_LONG_LONG = MPI_Datatype(11)
  type(MPI_Datatype), parameter :: MPI_UNSIGNED_LONG_LONG = MPI_Datatype(12)
  type(MPI_Datatype), parameter :: MPI_FLOAT = MPI_Datatype(13)
  type(MPI_Datatype), parameter :: MPI_DOUBLE = MPI_Datatype(14)
  type(MPI_Datatype), parameter :: MPI_LONG_DOUBLE = MPI_Datatype(15)
  type(MPI_Datatype), parameter :: MPI_INT8_T = MPI_Datatype(16)
  type(MPI_Datatype), parameter :: MPI_INT16_T = MPI_Datatype(17)
  type(MPI_Datatype), parameter :: MPI_INT32_T = MPI_Datatype(18)
  type(MPI_Datatype), parameter :: MPI_INT64_T = MPI_Datatype(19)
  type(MPI_Datatype), parameter :: MPI_UINT8_T = MPI_Datatype(20)
  type(MPI_Datatype), parameter :: MPI_UINT16_T = MPI_Datatype(21)
  type(MPI_Datatype), parameter :: MPI_UINT32_T = MPI_Datatype(22)
  type(MPI_Datatype), parameter :: MPI_UINT64_T = MPI_Datatype(23)
  type(MPI_Datatype), parameter :: MPI_C_BOOL = MPI_Datatype(24)
  type(MPI_Datatype), parameter :: MPI_WCHAR = MPI_Datatype(25)
  type(MPI_Datatype), parameter :: MPI_FLOAT_INT = MPI_Datatype(26)
  type(MPI_Datatype), parameter :: MPI_DOUBLE_INT = MPI_Datatype(27)
  type(MPI_Datatype), parameter :: MPI_LONG_INT = MPI_Datatype(28)
  type(MPI_Datatype), parameter :: MPI_2INT = MPI_Datatype(29)
  type(MPI_Datatype), parameter :: MPI_SHORT_INT = MPI_Datatype(30)
  type(MPI_Datatype), parameter :: MPI_LONG_DOUBLE_INT = MPI_Datatype(31)
  type(MPI_Datatype), parameter :: MPI_AINT = MPI_Datatype(32)
  type(MPI_Datatype), parameter :: MPI_COUNT = MPI_Datatype(33)
  type(MPI_Datatype), parameter :: MPI_OFFSET = MPI_Datatype(34)
  type(MPI_Datatype), parameter :: MPI_PACKED = MPI_Datatype(35)
  type(MPI_Datatype), parameter :: MPI_C_FLOAT_COMPLEX = MPI_Datatype(36)
  type(MPI_Datatype), parameter :: MPI_C_COMPLEX = MPI_Datatype(36)
  type(MPI_Datatype), parameter :: MPI_C_DOUBLE_COMPLEX = MPI_Datatype(37)
  type(MPI_Datatype), parameter :: MPI_C_LONG_DOUBLE_COMPLEX = MPI_Datatype(38)
  type(MPI_Datatype), parameter :: MPI_CXX_BOOL = MPI_Datatype(39)
  type(MPI_Datatype), parameter :: MPI_CXX_FLOAT_COMPLEX = MPI_Datatype(40)
  type(MPI_Datatype), parameter :: MPI_CXX_DOUBLE_COMPLEX = MPI_Datatype(41)
  type(MPI_Datatype), parameter :: MPI_CXX_LONG_DOUBLE_COMPLEX = MPI_Datatype(42)
  type(MPI_Datatype), parameter :: MPI_INTEGER = MPI_Datatype(43)
  type(MPI_Datatype), parameter :: MPI_REAL = MPI_Datatype(44)
  type(MPI_Datatype), parameter :: MPI_DOUBLE_PRECISION = MPI_Datatype(45)
  type(MPI_Datatype), parameter :: MPI_LOGICAL = MPI_Datatype(46)
  type(MPI_Datatype), parameter :: MPI_CHARACTER = MPI_Datatype(47)
  type(MPI_Datatype), parameter :: MPI_COMPLEX = MPI_Datatype(48)
  type(MPI_Datatype), parameter :: MPI_DOUBLE_COMPLEX = MPI_Datatype(49)
  type(MPI_Datatype), parameter :: MPI_2INTEGER = MPI_Datatype(50)
  type(MPI_Datatype), parameter :: MPI_INTEGER1 = MPI_Datatype(51)
  type(MPI_Datatype), parameter :: MPI_INTEGER2 = MPI_Datatype(52)
  type(MPI_Datatype), parameter :: MPI_INTEGER4 = MPI_Datatype(53)
  type(MPI_Datatype), parameter :: MPI_INTEGER8 = MPI_Datatype(54)
  type(MPI_Datatype), parameter :: MPI_REAL4 = MPI_Datatype(55)
  type(MPI_Datatype), parameter :: MPI_REAL8 = MPI_Datatype(56)
  type(MPI_Datatype), parameter :: MPI_COMPLEX8 = MPI_Datatype(57)
  type(MPI_Datatype), parameter :: MPI_COMPLEX16 = MPI_Datatype(58)
  integer, parameter :: MPI_COMBINER_NAMED = 1
  integer, parameter :: MPI_COMBINER_DUP = 2
  integer, parameter :: MPI_COMBINER_CONTIGUOUS = 3
  integer, parameter :: MPI_COMBINER_VECTOR = 4
  integer, parameter :: MPI_COMBINER_HVECTOR_INTEGER = 5
  integer, parameter :: MPI_COMBINER_HVECTOR = 6
  integer, parameter :: MPI_COMBINER_INDEXED = 7
  integer, parameter :: MPI_COMBINER_HINDEXED_INTEGER = 8
  integer, parameter :: MPI_COMBINER_HINDEXED = 9
  integer, parameter :: MPI_COMBINER_INDEXED_BLOCK = 10
  integer, parameter :: MPI_COMBINER_STRUCT_INTEGER = 11
  integer, parameter :: MPI_COMBINER_STRUCT = 12
  integer, parameter :: MPI_COMBINER_SUBARRAY = 13
  integer, parameter :: MPI_COMBINER_DARRAY = 14
  integer, parameter :: MPI_COMBINER_F90_REAL = 15
  integer, parameter :: MPI_COMBINER_F90_COMPLEX = 16
  integer, parameter :: MPI_COMBINER_F90_INTEGER = 17
  integer, parameter :: MPI_COMBINER_RESIZED = 18
  integer, parameter :: MPI_COMBINER_HINDEXED_BLOCK = 19
  integer, parameter :: MPI_ORDER_C = 0
  integer, parameter :: MPI_ORDER_FORTRAN = 1
  integer, parameter :: MPI_DISTRIBUTE_BLOCK = 0
  integer, parameter :: MPI_DISTRIBUTE_CYCLIC = 1
  integer, parameter :: MPI_DISTRIBUTE_NONE = 2
  integer, parameter :: MPI_DISTRIBUTE_DFLT_DARG = -1
  integer, parameter :: MPI_TYPECLASS_REAL = 1
  integer, parameter :: MPI_TYPECLASS_INTEGER = 2
  integer, parameter :: MPI_TYPECLASS_COMPLEX = 3
  type(MPI_Op), parameter :: MPI_OP_NULL = MPI_Op(0)
  type(MPI_Op), parameter :: MPI_MAX = MPI_Op(1)
  type(MPI_Op), parameter :: MPI_MIN = MPI_Op(2)
  type(MPI_Op), parameter :: MPI_SUM = MPI_Op(3)
  type(MPI_Op), parameter :: MPI_PROD = MPI_Op(4)
  type(MPI_Op), parameter :: MPI_LAND = MPI_Op(5)
  type(MPI_Op), parameter :: MPI_BAND = MPI_Op(6)
  type(MPI_Op), parameter :: MPI_LOR = MPI_Op(7)
  type(MPI_Op), parameter :: MPI_BOR = MPI_Op(8)
  type(MPI_Op), parameter :: MPI_LXOR = MPI_Op(9)
  type(MPI_Op), parameter :: MPI_BXOR = MPI_Op(10)
  type(MPI_Op), parameter :: MPI_MINLOC = MPI_Op(11)
  type(MPI_Op), parameter :: MPI_MAXLOC = MPI_Op(12)
  type(MPI_Op), parameter :: MPI_REPLACE = MPI_Op(13)
  type(MPI_Op), parameter :: MPI_NO_OP = MPI_Op(14)
  integer, parameter :: MPI_SUCCESS = 0
  integer, parameter :: MPI_ERR_BUFFER = 1
  integer, parameter :: MPI_ERR_COUNT = 2
  integer, parameter :: MPI_ERR_TYPE = 3
  integer, parameter :: MPI_ERR_TAG = 4
  integer, parameter :: MPI_ERR_COMM = 5
  integer, parameter :: MPI_ERR_RANK = 6
  integer, parameter :: MPI_ERR_REQUEST = 7
  integer, parameter :: MPI_ERR_ROOT = 8
  integer, parameter :: MPI_ERR_GROUP = 9
  integer, parameter :: MPI_ERR_OP = 10
  integer, parameter :: MPI_ERR_TOPOLOGY = 11
  integer, parameter :: MPI_ERR_DIMS = 12
  integer, parameter :: MPI_ERR_ARG = 13
  integer, parameter :: MPI_ERR_UNKNOWN = 14
  integer, parameter :: MPI_ERR_TRUNCATE = 15
  integer, parameter :: MPI_ERR_OTHER = 16
  integer, parameter :: MPI_ERR_INTERN = 17
  integer, parameter :: MPI_ERR_IN_STATUS = 18
  integer, parameter :: MPI_ERR_PENDING = 19
  integer, parameter :: MPI_ERR_ACCESS = 20
  integer, parameter :: MPI_ERR_AMODE = 21
  integer, parameter :: MPI_ERR_ASSERT = 22
  integer, parameter :: MPI_ERR_BAD_FILE = 23
  integer, parameter :: MPI_ERR_BASE = 24
  integer, parameter :: MPI_ERR_CONVERSION = 25
  integer, parameter :: MPI_ERR_DISP = 26
  integer, parameter :: MPI_ERR_DUP_DATAREP = 27
  integer, parameter :: MPI_ERR_FILE_EXISTS = 28
  integer, parameter :: MPI_ERR_FILE_IN_USE = 29
  integer, parameter :: MPI_ERR_FILE = 30
  integer, parameter :: MPI_ERR_INFO_KEY = 31
  integer, parameter :: MPI_ERR_INFO_NOKEY = 32
  integer, parameter :: MPI_ERR_INFO_VALUE = 33
  integer, parameter :: MPI_ERR_INFO = 34
  integer, parameter :: MPI_ERR_IO = 35
  integer, parameter :: MPI_ERR_KEYVAL = 36
  integer, parameter :: MPI_ERR_LOCKTYPE = 37
  integer, parameter :: MPI_ERR_NAME = 38
  integer, parameter :: MPI_ERR_NO_MEM = 39
  integer, parameter :: MPI_ERR_NOT_SAME = 40
  integer, parameter :: MPI_ERR_NO_SPACE = 41
  integer, parameter :: MPI_ERR_NO_SUCH_FILE = 42
  integer, parameter :: MPI_ERR_PORT = 43
  integer, parameter :: MPI_ERR_QUOTA = 44
  integer, parameter :: MPI_ERR_READ_ONLY = 45
  integer, parameter :: MPI_ERR_RMA_CONFLICT = 46
  integer, parameter :: MPI_ERR_RMA_SYNC = 47
  integer, parameter :: MPI_ERR_SERVICE = 48
  integer, parameter :: MPI_ERR_SIZE = 49
  integer, parameter :: MPI_ERR_SPAWN = 50
  integer, parameter :: MPI_ERR_UNSUPPORTED_DATAREP = 51
  integer, parameter :: MPI_ERR_UNSUPPORTED_OPERATION = 52
  integer, parameter :: MPI_ERR_WIN = 53
  integer, parameter :: MPI_ERR_RMA_RANGE = 54
  integer, parameter :: MPI_ERR_RMA_ATTACH = 55
  integer, parameter :: MPI_ERR_RMA_SHARED = 56
  integer, parameter :: MPI_ERR_RMA_FLAVOR = 57
  integer, parameter :: MPI_ERR_LASTCODE = 64
  integer, parameter :: MPI_MAX_OBJECT_NAME = 128
  integer, parameter :: MPI_MAX_INFO_KEY = 255
  integer, parameter :: MPI_MAX_INFO_VAL = 1024
  integer, parameter :: MPI_MAX_LIBRARY_VERSION_STRING = 256
  type(MPI_Info), parameter :: MPI_INFO_ENV = MPI_Info(1)
  integer, parameter :: MPI_KEYVAL_INVALID = 0
  integer, parameter :: MPI_TAG_UB = 1
  integer, parameter :: MPI_HOST = 2
  integer, parameter :: MPI_IO = 3
  integer, parameter :: MPI_WTIME_IS_GLOBAL = 4
  integer, parameter :: MPI_UNIVERSE_SIZE = 5
  integer, parameter :: MPI_LASTUSEDCODE = 6
  integer, parameter :: MPI_APPNUM = 7
  ! Sentinels, recognised by their address (the common block of mpif.h).
  integer :: MPI_BOTTOM, MPI_IN_PLACE
  type(MPI_Status) :: MPI_STATUS_IGNORE
  type(MPI_Status) :: MPI_STATUSES_IGNORE(1)
  common /qcg_mpi_fortran/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE
  save /qcg_mpi_fortran/
  ! Predefined attribute callbacks.
  external :: MPI_COMM_NULL_COPY_FN
  external :: MPI_COMM_NULL_DELETE_FN
  external :: MPI_COMM_DUP_FN
  external :: MPI_TYPE_NULL_COPY_FN
  external :: MPI_TYPE_NULL_DELETE_FN
  external :: MPI_TYPE_DUP_FN
  interface operator(==)
    module procedure qcg_eq_comm
    module procedure qcg_eq_datatype
    module procedure qcg_eq_op
    module procedure qcg_eq_group
    module procedure qcg_eq_request
    module procedure qcg_eq_errhandler
    module procedure qcg_eq_info
    module procedure qcg_eq_message
    module procedure qcg_eq_win
    module procedure qcg_eq_file
  end interface
  interface operator(/=)
    module procedure qcg_ne_comm
    module procedure qcg_ne_datatype
    module procedure qcg_ne_op
    module procedure qcg_ne_group
    module procedure qcg_ne_request
    module procedure qcg_ne_errhandler
    module procedure qcg_ne_info
    module procedure qcg_ne_message
    module procedure qcg_ne_win
    module procedure qcg_ne_file
  end interface
contains
  elemental logical function qcg_eq_comm(a, b)
    type(MPI_Comm), intent(in) :: a, b
    qcg_eq_comm = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_comm
  elemental logical function qcg_ne_comm(a, b)
    type(MPI_Comm), intent(in) :: a, b
    qcg_ne_comm = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_comm
  elemental logical function qcg_eq_datatype(a, b)
    type(MPI_Datatype), intent(in) :: a, b
    qcg_eq_datatype = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_datatype
  elemental logical function qcg_ne_datatype(a, b)
    type(MPI_Datatype), intent(in) :: a, b
    qcg_ne_datatype = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_datatype
  elemental logical function qcg_eq_op(a, b)
    type(MPI_Op), intent(in) :: a, b
    qcg_eq_op = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_op
  elemental logical function qcg_ne_op(a, b)
    type(MPI_Op), intent(in) :: a, b
    qcg_ne_op = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_op
  elemental logical function qcg_eq_group(a, b)
    type(MPI_Group), intent(in) :: a, b
    qcg_eq_group = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_group
  elemental logical function qcg_ne_group(a, b)
    type(MPI_Group), intent(in) :: a, b
    qcg_ne_group = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_group
  elemental logical function qcg_eq_request(a, b)
    type(MPI_Request), intent(in) :: a, b
    qcg_eq_request = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_request
  elemental logical function qcg_ne_request(a, b)
    type(MPI_Request), intent(in) :: a, b
    qcg_ne_request = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_request
  elemental logical function qcg_eq_errhandler(a, b)
    type(MPI_Errhandler), intent(in) :: a, b
    qcg_eq_errhandler = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_errhandler
  elemental logical function qcg_ne_errhandler(a, b)
    type(MPI_Errhandler), intent(in) :: a, b
    qcg_ne_errhandler = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_errhandler
  elemental logical function qcg_eq_info(a, b)
    type(MPI_Info), intent(in) :: a, b
    qcg_eq_info = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_info
  elemental logical function qcg_ne_info(a, b)
    type(MPI_Info), intent(in) :: a, b
    qcg_ne_info = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_info
  elemental logical function qcg_eq_message(a, b)
    type(MPI_Message), intent(in) :: a, b
    qcg_eq_message = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_message
  elemental logical function qcg_ne_message(a, b)
    type(MPI_Message), intent(in) :: a, b
    qcg_ne_message = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_message
  elemental logical function qcg_eq_win(a, b)
    type(MPI_Win), intent(in) :: a, b
    qcg_eq_win = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_win
  elemental logical function qcg_ne_win(a, b)
    type(MPI_Win), intent(in) :: a, b
    qcg_ne_win = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_win
  elemental logical function qcg_eq_file(a, b)
    type(MPI_File), intent(in) :: a, b
    qcg_eq_file = a%MPI_VAL == b%MPI_VAL
  end function qcg_eq_file
  elemental logical function qcg_ne_file(a, b)
    type(MPI_File), intent(in) :: a, b
    qcg_ne_file = a%MPI_VAL /= b%MPI_VAL
  end function qcg_ne_file
  subroutine MPI_Send(buf, count, datatype, dest, tag, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_send(buf, count, datatype, dest, tag, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Send
  subroutine MPI_Ssend(buf, count, datatype, dest, tag, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ssend(buf, count, datatype, dest, tag, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ssend
  subroutine MPI_Recv(buf, count, datatype, source, tag, comm, status, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_recv(buf, count, datatype, source, tag, comm, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Recv
  subroutine MPI_Isend(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_isend(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Isend
  subroutine MPI_Irecv(buf, count, datatype, source, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_irecv(buf, count, datatype, source, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Irecv
  subroutine MPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, &
      recvtype, source, recvtag, comm, status, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    integer :: dest
    integer :: sendtag
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: source
    integer :: recvtag
    type(MPI_Comm) :: comm
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, &
        source, recvtag, comm, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Sendrecv
  subroutine MPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, &
      status, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: sendtag
    integer :: source
    integer :: recvtag
    type(MPI_Comm) :: comm
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, status, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Sendrecv_replace
  subroutine MPI_Wait(request, status, ierror)
    type(MPI_Request) :: request
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_wait(request, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Wait
  subroutine MPI_Waitall(count, array_of_requests, array_of_statuses, ierror)
    integer :: count
    type(MPI_Request) :: array_of_requests(*)
    type(MPI_Status) :: array_of_statuses(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_waitall(count, array_of_requests, array_of_statuses, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Waitall
  subroutine MPI_Waitany(count, array_of_requests, index, status, ierror)
    integer :: count
    type(MPI_Request) :: array_of_requests(*)
    integer :: index
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_waitany(count, array_of_requests, index, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Waitany
  subroutine MPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, &
      array_of_statuses, ierror)
    integer :: incount
    type(MPI_Request) :: array_of_requests(*)
    integer :: outcount
    integer :: array_of_indices(*)
    type(MPI_Status) :: array_of_statuses(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Waitsome
  subroutine MPI_Test(request, flag, status, ierror)
    type(MPI_Request) :: request
    logical :: flag
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_test(request, flag, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Test
  subroutine MPI_Testall(count, array_of_requests, flag, array_of_statuses, ierror)
    integer :: count
    type(MPI_Request) :: array_of_requests(*)
    logical :: flag
    type(MPI_Status) :: array_of_statuses(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_testall(count, array_of_requests, flag, array_of_statuses, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Testall
  subroutine MPI_Testany(count, array_of_requests, index, flag, status, ierror)
    integer :: count
    type(MPI_Request) :: array_of_requests(*)
    integer :: index
    logical :: flag
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_testany(count, array_of_requests, index, flag, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Testany
  subroutine MPI_Probe(source, tag, comm, status, ierror)
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_probe(source, tag, comm, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Probe
  subroutine MPI_Iprobe(source, tag, comm, flag, status, ierror)
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    logical :: flag
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iprobe(source, tag, comm, flag, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iprobe
  subroutine MPI_Get_count(status, datatype, count, ierror)
    type(MPI_Status) :: status
    type(MPI_Datatype) :: datatype
    integer :: count
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_count(status, datatype, count, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_count
  subroutine MPI_Cancel(request, ierror)
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cancel(request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cancel
  subroutine MPI_Test_cancelled(status, flag, ierror)
    type(MPI_Status) :: status
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_test_cancelled(status, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Test_cancelled
  subroutine MPI_Request_free(request, ierror)
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_request_free(request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Request_free
  subroutine MPI_Bsend(buf, count, datatype, dest, tag, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_bsend(buf, count, datatype, dest, tag, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Bsend
  subroutine MPI_Rsend(buf, count, datatype, dest, tag, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_rsend(buf, count, datatype, dest, tag, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Rsend
  subroutine MPI_Ibsend(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ibsend(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ibsend
  subroutine MPI_Issend(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_issend(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Issend
  subroutine MPI_Irsend(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_irsend(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Irsend
  subroutine MPI_Buffer_attach(buffer, size, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer
    type(*), dimension(*) :: buffer
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_buffer_attach(buffer, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Buffer_attach
  subroutine MPI_Buffer_detach(buffer_addr, size, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer_addr
    type(*), dimension(*) :: buffer_addr
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_buffer_detach(buffer_addr, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Buffer_detach
  subroutine MPI_Send_init(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_send_init(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Send_init
  subroutine MPI_Bsend_init(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_bsend_init(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Bsend_init
  subroutine MPI_Ssend_init(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ssend_init(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ssend_init
  subroutine MPI_Rsend_init(buf, count, datatype, dest, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: dest
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_rsend_init(buf, count, datatype, dest, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Rsend_init
  subroutine MPI_Recv_init(buf, count, datatype, source, tag, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_recv_init(buf, count, datatype, source, tag, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Recv_init
  subroutine MPI_Start(request, ierror)
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_start(request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Start
  subroutine MPI_Startall(count, array_of_requests, ierror)
    integer :: count
    type(MPI_Request) :: array_of_requests(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_startall(count, array_of_requests, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Startall
  subroutine MPI_Mprobe(source, tag, comm, message, status, ierror)
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    type(MPI_Message) :: message
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_mprobe(source, tag, comm, message, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Mprobe
  subroutine MPI_Improbe(source, tag, comm, flag, message, status, ierror)
    integer :: source
    integer :: tag
    type(MPI_Comm) :: comm
    logical :: flag
    type(MPI_Message) :: message
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_improbe(source, tag, comm, flag, message, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Improbe
  subroutine MPI_Mrecv(buf, count, datatype, message, status, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Message) :: message
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_mrecv(buf, count, datatype, message, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Mrecv
  subroutine MPI_Imrecv(buf, count, datatype, message, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buf
    type(*), dimension(*) :: buf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Message) :: message
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_imrecv(buf, count, datatype, message, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Imrecv
  subroutine MPI_Testsome(incount, array_of_requests, outcount, array_of_indices, &
      array_of_statuses, ierror)
    integer :: incount
    type(MPI_Request) :: array_of_requests(*)
    integer :: outcount
    integer :: array_of_indices(*)
    type(MPI_Status) :: array_of_statuses(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Testsome
  subroutine MPI_Request_get_status(request, flag, status, ierror)
    type(MPI_Request) :: request
    logical :: flag
    type(MPI_Status) :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_request_get_status(request, flag, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Request_get_status
  subroutine MPI_Status_set_elements(status, datatype, count, ierror)
    type(MPI_Status) :: status
    type(MPI_Datatype) :: datatype
    integer :: count
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_status_set_elements(status, datatype, count, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Status_set_elements
  subroutine MPI_Status_set_elements_x(status, datatype, count, ierror)
    type(MPI_Status) :: status
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: count
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_status_set_elements_x(status, datatype, count, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Status_set_elements_x
  subroutine MPI_Status_set_cancelled(status, flag, ierror)
    type(MPI_Status) :: status
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_status_set_cancelled(status, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Status_set_cancelled
  subroutine MPI_Ibarrier(comm, request, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ibarrier(comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ibarrier
  subroutine MPI_Ibcast(buffer, count, datatype, root, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer
    type(*), dimension(*) :: buffer
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: root
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ibcast(buffer, count, datatype, root, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ibcast
  subroutine MPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    integer :: root
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ireduce
  subroutine MPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iallreduce
  subroutine MPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
      request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Igather
  subroutine MPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
      root, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, &
        comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Igatherv
  subroutine MPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
      request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iscatter
  subroutine MPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, &
      root, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, &
        comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iscatterv
  subroutine MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
      request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iallgather
  subroutine MPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
      comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, &
        request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iallgatherv
  subroutine MPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
      request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ialltoall
  subroutine MPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, &
      recvtype, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: sdispls(*)
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: rdispls(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, &
        recvtype, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ialltoallv
  subroutine MPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, &
      recvtypes, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: sdispls(*)
    type(MPI_Datatype) :: sendtypes(*)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: rdispls(*)
    type(MPI_Datatype) :: recvtypes(*)
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, &
        recvtypes, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ialltoallw
  subroutine MPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, &
      ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ireduce_scatter
  subroutine MPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request, &
      ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ireduce_scatter_block
  subroutine MPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iscan(sendbuf, recvbuf, count, datatype, op, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iscan
  subroutine MPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_iexscan(sendbuf, recvbuf, count, datatype, op, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Iexscan
  subroutine MPI_Type_size(datatype, size, ierror)
    type(MPI_Datatype) :: datatype
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_size(datatype, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_size
  subroutine MPI_Type_get_extent(datatype, lb, extent, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: lb
    integer(kind=8) :: extent
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_extent(datatype, lb, extent, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_extent
  subroutine MPI_Type_contiguous(count, oldtype, newtype, ierror)
    integer :: count
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_contiguous(count, oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_contiguous
  subroutine MPI_Type_vector(count, blocklength, stride, oldtype, newtype, ierror)
    integer :: count
    integer :: blocklength
    integer :: stride
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_vector(count, blocklength, stride, oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_vector
  subroutine MPI_Type_create_struct(count, array_of_blocklengths, array_of_displacements, &
      array_of_types, newtype, ierror)
    integer :: count
    integer :: array_of_blocklengths(*)
    integer(kind=8) :: array_of_displacements(*)
    type(MPI_Datatype) :: array_of_types(*)
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_struct(count, array_of_blocklengths, array_of_displacements, &
        array_of_types, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_struct
  subroutine MPI_Type_commit(datatype, ierror)
    type(MPI_Datatype) :: datatype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_commit(datatype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_commit
  subroutine MPI_Type_free(datatype, ierror)
    type(MPI_Datatype) :: datatype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_free(datatype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_free
  subroutine MPI_Type_set_name(datatype, type_name, ierror)
    type(MPI_Datatype) :: datatype
    character(len=*) :: type_name
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_set_name(datatype, type_name, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_set_name
  subroutine MPI_Type_get_name(datatype, type_name, resultlen, ierror)
    type(MPI_Datatype) :: datatype
    character(len=*) :: type_name
    integer :: resultlen
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_name(datatype, type_name, resultlen, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_name
  subroutine MPI_Type_create_keyval(type_copy_attr_fn, type_delete_attr_fn, type_keyval, &
      extra_state, ierror)
    external :: type_copy_attr_fn
    external :: type_delete_attr_fn
    integer :: type_keyval
    integer(kind=8) :: extra_state
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_keyval(type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_keyval
  subroutine MPI_Type_free_keyval(type_keyval, ierror)
    integer :: type_keyval
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_free_keyval(type_keyval, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_free_keyval
  subroutine MPI_Type_set_attr(datatype, type_keyval, attribute_val, ierror)
    type(MPI_Datatype) :: datatype
    integer :: type_keyval
    integer(kind=8) :: attribute_val
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_set_attr(datatype, type_keyval, attribute_val, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_set_attr
  subroutine MPI_Type_get_attr(datatype, type_keyval, attribute_val, flag, ierror)
    type(MPI_Datatype) :: datatype
    integer :: type_keyval
    integer(kind=8) :: attribute_val
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_attr(datatype, type_keyval, attribute_val, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_attr
  subroutine MPI_Type_delete_attr(datatype, type_keyval, ierror)
    type(MPI_Datatype) :: datatype
    integer :: type_keyval
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_delete_attr(datatype, type_keyval, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_delete_attr
  subroutine MPI_Type_size_x(datatype, size, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_size_x(datatype, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_size_x
  subroutine MPI_Type_get_extent_x(datatype, lb, extent, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: lb
    integer(kind=8) :: extent
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_extent_x(datatype, lb, extent, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_extent_x
  subroutine MPI_Type_get_true_extent(datatype, true_lb, true_extent, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: true_lb
    integer(kind=8) :: true_extent
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_true_extent(datatype, true_lb, true_extent, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_true_extent
  subroutine MPI_Type_get_true_extent_x(datatype, true_lb, true_extent, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: true_lb
    integer(kind=8) :: true_extent
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_true_extent_x(datatype, true_lb, true_extent, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_true_extent_x
  subroutine MPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype, ierror)
    integer :: count
    integer :: blocklength
    integer(kind=8) :: stride
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_hvector(count, blocklength, stride, oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_hvector
  subroutine MPI_Type_indexed(count, array_of_blocklengths, array_of_displacements, oldtype, &
      newtype, ierror)
    integer :: count
    integer :: array_of_blocklengths(*)
    integer :: array_of_displacements(*)
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_indexed(count, array_of_blocklengths, array_of_displacements, oldtype, newtype, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_indexed
  subroutine MPI_Type_create_hindexed(count, array_of_blocklengths, array_of_displacements, &
      oldtype, newtype, ierror)
    integer :: count
    integer :: array_of_blocklengths(*)
    integer(kind=8) :: array_of_displacements(*)
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype, &
        newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_hindexed
  subroutine MPI_Type_create_indexed_block(count, blocklength, array_of_displacements, oldtype, &
      newtype, ierror)
    integer :: count
    integer :: blocklength
    integer :: array_of_displacements(*)
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_indexed_block(count, blocklength, array_of_displacements, oldtype, &
        newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_indexed_block
  subroutine MPI_Type_create_hindexed_block(count, blocklength, array_of_displacements, oldtype, &
      newtype, ierror)
    integer :: count
    integer :: blocklength
    integer(kind=8) :: array_of_displacements(*)
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_hindexed_block(count, blocklength, array_of_displacements, oldtype, &
        newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_hindexed_block
  subroutine MPI_Type_create_subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, &
      order, oldtype, newtype, ierror)
    integer :: ndims
    integer :: array_of_sizes(*)
    integer :: array_of_subsizes(*)
    integer :: array_of_starts(*)
    integer :: order
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_subarray(ndims, array_of_sizes, array_of_subsizes, array_of_starts, order, &
        oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_subarray
  subroutine MPI_Type_create_darray(size, rank, ndims, array_of_gsizes, array_of_distribs, &
      array_of_dargs, array_of_psizes, order, oldtype, newtype, ierror)
    integer :: size
    integer :: rank
    integer :: ndims
    integer :: array_of_gsizes(*)
    integer :: array_of_distribs(*)
    integer :: array_of_dargs(*)
    integer :: array_of_psizes(*)
    integer :: order
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_darray(size, rank, ndims, array_of_gsizes, array_of_distribs, &
        array_of_dargs, array_of_psizes, order, oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_darray
  subroutine MPI_Type_create_resized(oldtype, lb, extent, newtype, ierror)
    type(MPI_Datatype) :: oldtype
    integer(kind=8) :: lb
    integer(kind=8) :: extent
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_create_resized(oldtype, lb, extent, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_create_resized
  subroutine MPI_Type_dup(oldtype, newtype, ierror)
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_dup(oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_dup
  subroutine MPI_Type_match_size(typeclass, size, datatype, ierror)
    integer :: typeclass
    integer :: size
    type(MPI_Datatype) :: datatype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_match_size(typeclass, size, datatype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_match_size
  subroutine MPI_Type_get_envelope(datatype, num_integers, num_addresses, num_datatypes, combiner, &
      ierror)
    type(MPI_Datatype) :: datatype
    integer :: num_integers
    integer :: num_addresses
    integer :: num_datatypes
    integer :: combiner
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_envelope(datatype, num_integers, num_addresses, num_datatypes, combiner, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_envelope
  subroutine MPI_Type_get_contents(datatype, max_integers, max_addresses, max_datatypes, &
      array_of_integers, array_of_addresses, array_of_datatypes, ierror)
    type(MPI_Datatype) :: datatype
    integer :: max_integers
    integer :: max_addresses
    integer :: max_datatypes
    integer :: array_of_integers(*)
    integer(kind=8) :: array_of_addresses(*)
    type(MPI_Datatype) :: array_of_datatypes(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_get_contents(datatype, max_integers, max_addresses, max_datatypes, &
        array_of_integers, array_of_addresses, array_of_datatypes, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_get_contents
  subroutine MPI_Get_elements(status, datatype, count, ierror)
    type(MPI_Status) :: status
    type(MPI_Datatype) :: datatype
    integer :: count
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_elements(status, datatype, count, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_elements
  subroutine MPI_Get_elements_x(status, datatype, count, ierror)
    type(MPI_Status) :: status
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: count
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_elements_x(status, datatype, count, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_elements_x
  subroutine MPI_Get_address(location, address, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: location
    type(*), dimension(*) :: location
    integer(kind=8) :: address
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_address(location, address, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_address
  subroutine MPI_Pack(inbuf, incount, datatype, outbuf, outsize, position, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
    type(*), dimension(*) :: inbuf
    integer :: incount
    type(MPI_Datatype) :: datatype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
    type(*), dimension(*) :: outbuf
    integer :: outsize
    integer :: position
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_pack(inbuf, incount, datatype, outbuf, outsize, position, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Pack
  subroutine MPI_Unpack(inbuf, insize, position, outbuf, outcount, datatype, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
    type(*), dimension(*) :: inbuf
    integer :: insize
    integer :: position
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
    type(*), dimension(*) :: outbuf
    integer :: outcount
    type(MPI_Datatype) :: datatype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_unpack(inbuf, insize, position, outbuf, outcount, datatype, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Unpack
  subroutine MPI_Pack_size(incount, datatype, comm, size, ierror)
    integer :: incount
    type(MPI_Datatype) :: datatype
    type(MPI_Comm) :: comm
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_pack_size(incount, datatype, comm, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Pack_size
  subroutine MPI_Pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position, &
      ierror)
    character(len=*) :: datarep
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
    type(*), dimension(*) :: inbuf
    integer :: incount
    type(MPI_Datatype) :: datatype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
    type(*), dimension(*) :: outbuf
    integer(kind=8) :: outsize
    integer(kind=8) :: position
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_pack_external(datarep, inbuf, incount, datatype, outbuf, outsize, position, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Pack_external
  subroutine MPI_Unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype, &
      ierror)
    character(len=*) :: datarep
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
    type(*), dimension(*) :: inbuf
    integer(kind=8) :: insize
    integer(kind=8) :: position
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: outbuf
    type(*), dimension(*) :: outbuf
    integer :: outcount
    type(MPI_Datatype) :: datatype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_unpack_external(datarep, inbuf, insize, position, outbuf, outcount, datatype, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Unpack_external
  subroutine MPI_Pack_external_size(datarep, incount, datatype, size, ierror)
    character(len=*) :: datarep
    integer :: incount
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_pack_external_size(datarep, incount, datatype, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Pack_external_size
  subroutine MPI_Type_hvector(count, blocklength, stride, oldtype, newtype, ierror)
    integer :: count
    integer :: blocklength
    integer(kind=8) :: stride
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_hvector(count, blocklength, stride, oldtype, newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_hvector
  subroutine MPI_Type_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype, &
      newtype, ierror)
    integer :: count
    integer :: array_of_blocklengths(*)
    integer(kind=8) :: array_of_displacements(*)
    type(MPI_Datatype) :: oldtype
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype, newtype, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_hindexed
  function MPI_Aint_add(base, disp) result(r)
    integer(kind=8) :: base
    integer(kind=8) :: disp
    integer(kind=8) :: r
    r = qcg_aint_add(base, disp)
  end function MPI_Aint_add
  function MPI_Aint_diff(addr1, addr2) result(r)
    integer(kind=8) :: addr1
    integer(kind=8) :: addr2
    integer(kind=8) :: r
    r = qcg_aint_diff(addr1, addr2)
  end function MPI_Aint_diff
  subroutine MPI_Address(location, address, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: location
    type(*), dimension(*) :: location
    integer(kind=8) :: address
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_address(location, address, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Address
  subroutine MPI_Type_extent(datatype, extent, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: extent
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_extent(datatype, extent, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_extent
  subroutine MPI_Type_lb(datatype, displacement, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: displacement
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_lb(datatype, displacement, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_lb
  subroutine MPI_Type_ub(datatype, displacement, ierror)
    type(MPI_Datatype) :: datatype
    integer(kind=8) :: displacement
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_ub(datatype, displacement, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_ub
  subroutine MPI_Type_struct(count, array_of_blocklengths, array_of_displacements, array_of_types, &
      newtype, ierror)
    integer :: count
    integer :: array_of_blocklengths(*)
    integer(kind=8) :: array_of_displacements(*)
    type(MPI_Datatype) :: array_of_types(*)
    type(MPI_Datatype) :: newtype
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_type_struct(count, array_of_blocklengths, array_of_displacements, array_of_types, &
        newtype, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Type_struct
  subroutine MPI_Barrier(comm, ierror)
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_barrier(comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Barrier
  subroutine MPI_Bcast(buffer, count, datatype, root, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer
    type(*), dimension(*) :: buffer
    integer :: count
    type(MPI_Datatype) :: datatype
    integer :: root
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_bcast(buffer, count, datatype, root, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Bcast
  subroutine MPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    integer :: root
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Reduce
  subroutine MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_allreduce(sendbuf, recvbuf, count, datatype, op, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Allreduce
  subroutine MPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
      ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Gather
  subroutine MPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, &
      comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, &
        comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Gatherv
  subroutine MPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
      ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Scatter
  subroutine MPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, &
      root, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    integer :: root
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, &
        comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Scatterv
  subroutine MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
      ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Allgather
  subroutine MPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, &
      comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Allgatherv
  subroutine MPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
      ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Alltoall
  subroutine MPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, &
      recvtype, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: sdispls(*)
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: rdispls(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, &
        recvtype, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Alltoallv
  subroutine MPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Reduce_scatter
  subroutine MPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Reduce_scatter_block
  subroutine MPI_Scan(sendbuf, recvbuf, count, datatype, op, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_scan(sendbuf, recvbuf, count, datatype, op, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Scan
  subroutine MPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_exscan(sendbuf, recvbuf, count, datatype, op, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Exscan
  subroutine MPI_Op_create(user_fn, commute, op, ierror)
    external :: user_fn
    logical :: commute
    type(MPI_Op) :: op
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_op_create(user_fn, commute, op, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Op_create
  subroutine MPI_Op_free(op, ierror)
    type(MPI_Op) :: op
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_op_free(op, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Op_free
  subroutine MPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, &
      recvtypes, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: sdispls(*)
    type(MPI_Datatype) :: sendtypes(*)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: rdispls(*)
    type(MPI_Datatype) :: recvtypes(*)
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, &
        recvtypes, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Alltoallw
  subroutine MPI_Reduce_local(inbuf, inoutbuf, count, datatype, op, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: inbuf
    type(*), dimension(*) :: inbuf
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: inoutbuf
    type(*), dimension(*) :: inoutbuf
    integer :: count
    type(MPI_Datatype) :: datatype
    type(MPI_Op) :: op
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_reduce_local(inbuf, inoutbuf, count, datatype, op, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Reduce_local
  subroutine MPI_Op_commutative(op, commute, ierror)
    type(MPI_Op) :: op
    logical :: commute
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_op_commutative(op, commute, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Op_commutative
  subroutine MPI_Comm_rank(comm, rank, ierror)
    type(MPI_Comm) :: comm
    integer :: rank
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_rank(comm, rank, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_rank
  subroutine MPI_Comm_size(comm, size, ierror)
    type(MPI_Comm) :: comm
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_size(comm, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_size
  subroutine MPI_Comm_dup(comm, newcomm, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_dup(comm, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_dup
  subroutine MPI_Comm_split(comm, color, key, newcomm, ierror)
    type(MPI_Comm) :: comm
    integer :: color
    integer :: key
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_split(comm, color, key, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_split
  subroutine MPI_Comm_split_type(comm, split_type, key, info, newcomm, ierror)
    type(MPI_Comm) :: comm
    integer :: split_type
    integer :: key
    type(MPI_Info) :: info
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_split_type(comm, split_type, key, info, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_split_type
  subroutine MPI_Comm_free(comm, ierror)
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_free(comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_free
  subroutine MPI_Comm_group(comm, group, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Group) :: group
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_group(comm, group, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_group
  subroutine MPI_Comm_create(comm, group, newcomm, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Group) :: group
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_create(comm, group, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_create
  subroutine MPI_Comm_create_group(comm, group, tag, newcomm, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Group) :: group
    integer :: tag
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_create_group(comm, group, tag, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_create_group
  subroutine MPI_Comm_compare(comm1, comm2, result, ierror)
    type(MPI_Comm) :: comm1
    type(MPI_Comm) :: comm2
    integer :: result
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_compare(comm1, comm2, result, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_compare
  subroutine MPI_Group_incl(group, n, ranks, newgroup, ierror)
    type(MPI_Group) :: group
    integer :: n
    integer :: ranks(*)
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_incl(group, n, ranks, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_incl
  subroutine MPI_Group_excl(group, n, ranks, newgroup, ierror)
    type(MPI_Group) :: group
    integer :: n
    integer :: ranks(*)
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_excl(group, n, ranks, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_excl
  subroutine MPI_Group_rank(group, rank, ierror)
    type(MPI_Group) :: group
    integer :: rank
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_rank(group, rank, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_rank
  subroutine MPI_Group_size(group, size, ierror)
    type(MPI_Group) :: group
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_size(group, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_size
  subroutine MPI_Group_free(group, ierror)
    type(MPI_Group) :: group
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_free(group, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_free
  subroutine MPI_Group_range_incl(group, n, ranges, newgroup, ierror)
    type(MPI_Group) :: group
    integer :: n
    integer :: ranges(3,*)
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_range_incl(group, n, ranges, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_range_incl
  subroutine MPI_Group_range_excl(group, n, ranges, newgroup, ierror)
    type(MPI_Group) :: group
    integer :: n
    integer :: ranges(3,*)
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_range_excl(group, n, ranges, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_range_excl
  subroutine MPI_Group_union(group1, group2, newgroup, ierror)
    type(MPI_Group) :: group1
    type(MPI_Group) :: group2
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_union(group1, group2, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_union
  subroutine MPI_Group_intersection(group1, group2, newgroup, ierror)
    type(MPI_Group) :: group1
    type(MPI_Group) :: group2
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_intersection(group1, group2, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_intersection
  subroutine MPI_Group_difference(group1, group2, newgroup, ierror)
    type(MPI_Group) :: group1
    type(MPI_Group) :: group2
    type(MPI_Group) :: newgroup
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_difference(group1, group2, newgroup, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_difference
  subroutine MPI_Group_translate_ranks(group1, n, ranks1, group2, ranks2, ierror)
    type(MPI_Group) :: group1
    integer :: n
    integer :: ranks1(*)
    type(MPI_Group) :: group2
    integer :: ranks2(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_translate_ranks(group1, n, ranks1, group2, ranks2, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_translate_ranks
  subroutine MPI_Group_compare(group1, group2, result, ierror)
    type(MPI_Group) :: group1
    type(MPI_Group) :: group2
    integer :: result
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_group_compare(group1, group2, result, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Group_compare
  subroutine MPI_Comm_idup(comm, newcomm, request, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Comm) :: newcomm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_idup(comm, newcomm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_idup
  subroutine MPI_Comm_dup_with_info(comm, info, newcomm, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Info) :: info
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_dup_with_info(comm, info, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_dup_with_info
  subroutine MPI_Comm_set_info(comm, info, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Info) :: info
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_set_info(comm, info, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_set_info
  subroutine MPI_Comm_get_info(comm, info_used, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Info) :: info_used
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_get_info(comm, info_used, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_get_info
  subroutine MPI_Comm_get_parent(parent, ierror)
    type(MPI_Comm) :: parent
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_get_parent(parent, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_get_parent
  subroutine MPI_Comm_set_name(comm, comm_name, ierror)
    type(MPI_Comm) :: comm
    character(len=*) :: comm_name
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_set_name(comm, comm_name, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_set_name
  subroutine MPI_Comm_get_name(comm, comm_name, resultlen, ierror)
    type(MPI_Comm) :: comm
    character(len=*) :: comm_name
    integer :: resultlen
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_get_name(comm, comm_name, resultlen, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_get_name
  subroutine MPI_Comm_create_keyval(comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, &
      extra_state, ierror)
    external :: comm_copy_attr_fn
    external :: comm_delete_attr_fn
    integer :: comm_keyval
    integer(kind=8) :: extra_state
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_create_keyval(comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_create_keyval
  subroutine MPI_Comm_free_keyval(comm_keyval, ierror)
    integer :: comm_keyval
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_free_keyval(comm_keyval, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_free_keyval
  subroutine MPI_Comm_set_attr(comm, comm_keyval, attribute_val, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval
    integer(kind=8) :: attribute_val
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_set_attr(comm, comm_keyval, attribute_val, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_set_attr
  subroutine MPI_Comm_get_attr(comm, comm_keyval, attribute_val, flag, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval
    integer(kind=8) :: attribute_val
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_get_attr(comm, comm_keyval, attribute_val, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_get_attr
  subroutine MPI_Comm_delete_attr(comm, comm_keyval, ierror)
    type(MPI_Comm) :: comm
    integer :: comm_keyval
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_delete_attr(comm, comm_keyval, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_delete_attr
  subroutine MPI_Keyval_free(keyval, ierror)
    integer :: keyval
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_keyval_free(keyval, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Keyval_free
  subroutine MPI_Attr_delete(comm, keyval, ierror)
    type(MPI_Comm) :: comm
    integer :: keyval
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_attr_delete(comm, keyval, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Attr_delete
  subroutine MPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, &
      newintercomm, ierror)
    type(MPI_Comm) :: local_comm
    integer :: local_leader
    type(MPI_Comm) :: peer_comm
    integer :: remote_leader
    integer :: tag
    type(MPI_Comm) :: newintercomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, &
        newintercomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Intercomm_create
  subroutine MPI_Intercomm_merge(intercomm, high, newintracomm, ierror)
    type(MPI_Comm) :: intercomm
    integer :: high
    type(MPI_Comm) :: newintracomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_intercomm_merge(intercomm, high, newintracomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Intercomm_merge
  subroutine MPI_Comm_test_inter(comm, flag, ierror)
    type(MPI_Comm) :: comm
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_test_inter(comm, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_test_inter
  subroutine MPI_Comm_remote_size(comm, size, ierror)
    type(MPI_Comm) :: comm
    integer :: size
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_remote_size(comm, size, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_remote_size
  subroutine MPI_Comm_remote_group(comm, group, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Group) :: group
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_remote_group(comm, group, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_remote_group
  subroutine MPI_Dims_create(nnodes, ndims, dims, ierror)
    integer :: nnodes
    integer :: ndims
    integer :: dims(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_dims_create(nnodes, ndims, dims, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Dims_create
  subroutine MPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart, ierror)
    type(MPI_Comm) :: comm_old
    integer :: ndims
    integer :: dims(*)
    logical :: periods(*)
    logical :: reorder
    type(MPI_Comm) :: comm_cart
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_create(comm_old, ndims, dims, periods, reorder, comm_cart, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_create
  subroutine MPI_Cart_get(comm, maxdims, dims, periods, coords, ierror)
    type(MPI_Comm) :: comm
    integer :: maxdims
    integer :: dims(*)
    logical :: periods(*)
    integer :: coords(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_get(comm, maxdims, dims, periods, coords, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_get
  subroutine MPI_Cartdim_get(comm, ndims, ierror)
    type(MPI_Comm) :: comm
    integer :: ndims
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cartdim_get(comm, ndims, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cartdim_get
  subroutine MPI_Cart_rank(comm, coords, rank, ierror)
    type(MPI_Comm) :: comm
    integer :: coords(*)
    integer :: rank
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_rank(comm, coords, rank, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_rank
  subroutine MPI_Cart_coords(comm, rank, maxdims, coords, ierror)
    type(MPI_Comm) :: comm
    integer :: rank
    integer :: maxdims
    integer :: coords(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_coords(comm, rank, maxdims, coords, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_coords
  subroutine MPI_Cart_shift(comm, direction, disp, rank_source, rank_dest, ierror)
    type(MPI_Comm) :: comm
    integer :: direction
    integer :: disp
    integer :: rank_source
    integer :: rank_dest
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_shift(comm, direction, disp, rank_source, rank_dest, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_shift
  subroutine MPI_Cart_sub(comm, remain_dims, newcomm, ierror)
    type(MPI_Comm) :: comm
    logical :: remain_dims(*)
    type(MPI_Comm) :: newcomm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_sub(comm, remain_dims, newcomm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_sub
  subroutine MPI_Cart_map(comm, ndims, dims, periods, newrank, ierror)
    type(MPI_Comm) :: comm
    integer :: ndims
    integer :: dims(*)
    logical :: periods(*)
    integer :: newrank
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_cart_map(comm, ndims, dims, periods, newrank, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Cart_map
  subroutine MPI_Graph_create(comm_old, nnodes, index, edges, reorder, comm_graph, ierror)
    type(MPI_Comm) :: comm_old
    integer :: nnodes
    integer :: index(*)
    integer :: edges(*)
    logical :: reorder
    type(MPI_Comm) :: comm_graph
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_graph_create(comm_old, nnodes, index, edges, reorder, comm_graph, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Graph_create
  subroutine MPI_Graphdims_get(comm, nnodes, nedges, ierror)
    type(MPI_Comm) :: comm
    integer :: nnodes
    integer :: nedges
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_graphdims_get(comm, nnodes, nedges, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Graphdims_get
  subroutine MPI_Graph_get(comm, maxindex, maxedges, index, edges, ierror)
    type(MPI_Comm) :: comm
    integer :: maxindex
    integer :: maxedges
    integer :: index(*)
    integer :: edges(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_graph_get(comm, maxindex, maxedges, index, edges, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Graph_get
  subroutine MPI_Graph_neighbors_count(comm, rank, nneighbors, ierror)
    type(MPI_Comm) :: comm
    integer :: rank
    integer :: nneighbors
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_graph_neighbors_count(comm, rank, nneighbors, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Graph_neighbors_count
  subroutine MPI_Graph_neighbors(comm, rank, maxneighbors, neighbors, ierror)
    type(MPI_Comm) :: comm
    integer :: rank
    integer :: maxneighbors
    integer :: neighbors(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_graph_neighbors(comm, rank, maxneighbors, neighbors, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Graph_neighbors
  subroutine MPI_Graph_map(comm, nnodes, index, edges, newrank, ierror)
    type(MPI_Comm) :: comm
    integer :: nnodes
    integer :: index(*)
    integer :: edges(*)
    integer :: newrank
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_graph_map(comm, nnodes, index, edges, newrank, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Graph_map
  subroutine MPI_Dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info, &
      reorder, comm_dist_graph, ierror)
    type(MPI_Comm) :: comm_old
    integer :: n
    integer :: sources(*)
    integer :: degrees(*)
    integer :: destinations(*)
    integer :: weights(*)
    type(MPI_Info) :: info
    logical :: reorder
    type(MPI_Comm) :: comm_dist_graph
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info, reorder, &
        comm_dist_graph, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Dist_graph_create
  subroutine MPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree, &
      destinations, destweights, info, reorder, comm_dist_graph, ierror)
    type(MPI_Comm) :: comm_old
    integer :: indegree
    integer :: sources(*)
    integer :: sourceweights(*)
    integer :: outdegree
    integer :: destinations(*)
    integer :: destweights(*)
    type(MPI_Info) :: info
    logical :: reorder
    type(MPI_Comm) :: comm_dist_graph
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree, &
        destinations, destweights, info, reorder, comm_dist_graph, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Dist_graph_create_adjacent
  subroutine MPI_Dist_graph_neighbors_count(comm, indegree, outdegree, weighted, ierror)
    type(MPI_Comm) :: comm
    integer :: indegree
    integer :: outdegree
    logical :: weighted
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_dist_graph_neighbors_count(comm, indegree, outdegree, weighted, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Dist_graph_neighbors_count
  subroutine MPI_Dist_graph_neighbors(comm, maxindegree, sources, sourceweights, maxoutdegree, &
      destinations, destweights, ierror)
    type(MPI_Comm) :: comm
    integer :: maxindegree
    integer :: sources(*)
    integer :: sourceweights(*)
    integer :: maxoutdegree
    integer :: destinations(*)
    integer :: destweights(*)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_dist_graph_neighbors(comm, maxindegree, sources, sourceweights, maxoutdegree, &
        destinations, destweights, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Dist_graph_neighbors
  subroutine MPI_Topo_test(comm, status, ierror)
    type(MPI_Comm) :: comm
    integer :: status
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_topo_test(comm, status, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Topo_test
  subroutine MPI_Neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
      comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Neighbor_allgather
  subroutine MPI_Neighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, &
      recvtype, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_neighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, &
        recvtype, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Neighbor_allgatherv
  subroutine MPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
      comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Neighbor_alltoall
  subroutine MPI_Neighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, &
      rdispls, recvtype, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: sdispls(*)
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: rdispls(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_neighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, &
        rdispls, recvtype, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Neighbor_alltoallv
  subroutine MPI_Neighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, &
      rdispls, recvtypes, comm, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer(kind=8) :: sdispls(*)
    type(MPI_Datatype) :: sendtypes(*)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer(kind=8) :: rdispls(*)
    type(MPI_Datatype) :: recvtypes(*)
    type(MPI_Comm) :: comm
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_neighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, &
        rdispls, recvtypes, comm, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Neighbor_alltoallw
  subroutine MPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
      comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ineighbor_allgather
  subroutine MPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, &
      recvtype, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: displs(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, &
        recvtype, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ineighbor_allgatherv
  subroutine MPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &
      comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcount
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcount
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &
        request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ineighbor_alltoall
  subroutine MPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, &
      rdispls, recvtype, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer :: sdispls(*)
    type(MPI_Datatype) :: sendtype
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer :: rdispls(*)
    type(MPI_Datatype) :: recvtype
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, &
        rdispls, recvtype, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ineighbor_alltoallv
  subroutine MPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, &
      rdispls, recvtypes, comm, request, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: sendbuf
    type(*), dimension(*) :: sendbuf
    integer :: sendcounts(*)
    integer(kind=8) :: sdispls(*)
    type(MPI_Datatype) :: sendtypes(*)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: recvbuf
    type(*), dimension(*) :: recvbuf
    integer :: recvcounts(*)
    integer(kind=8) :: rdispls(*)
    type(MPI_Datatype) :: recvtypes(*)
    type(MPI_Comm) :: comm
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, &
        rdispls, recvtypes, comm, request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Ineighbor_alltoallw
  subroutine MPI_Init(ierror)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_init(qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Init
  subroutine MPI_Init_thread(required, provided, ierror)
    integer :: required
    integer :: provided
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_init_thread(required, provided, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Init_thread
  subroutine MPI_Query_thread(provided, ierror)
    integer :: provided
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_query_thread(provided, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Query_thread
  subroutine MPI_Initialized(flag, ierror)
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_initialized(flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Initialized
  subroutine MPI_Finalize(ierror)
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_finalize(qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Finalize
  subroutine MPI_Finalized(flag, ierror)
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_finalized(flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Finalized
  subroutine MPI_Abort(comm, errorcode, ierror)
    type(MPI_Comm) :: comm
    integer :: errorcode
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_abort(comm, errorcode, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Abort
  function MPI_Wtime() result(r)
    double precision :: r
    r = qcg_wtime()
  end function MPI_Wtime
  function MPI_Wtick() result(r)
    double precision :: r
    r = qcg_wtick()
  end function MPI_Wtick
  subroutine MPI_Get_processor_name(name, resultlen, ierror)
    character(len=*) :: name
    integer :: resultlen
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_processor_name(name, resultlen, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_processor_name
  subroutine MPI_Get_version(version, subversion, ierror)
    integer :: version
    integer :: subversion
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_version(version, subversion, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_version
  subroutine MPI_Error_string(errorcode, string, resultlen, ierror)
    integer :: errorcode
    character(len=*) :: string
    integer :: resultlen
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_error_string(errorcode, string, resultlen, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Error_string
  subroutine MPI_Error_class(errorcode, errorclass, ierror)
    integer :: errorcode
    integer :: errorclass
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_error_class(errorcode, errorclass, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Error_class
  subroutine MPI_Comm_set_errhandler(comm, errhandler, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_set_errhandler(comm, errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_set_errhandler
  subroutine MPI_Comm_get_errhandler(comm, errhandler, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_get_errhandler(comm, errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_get_errhandler
  subroutine MPI_Comm_create_errhandler(comm_errhandler_fn, errhandler, ierror)
    external :: comm_errhandler_fn
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_create_errhandler(comm_errhandler_fn, errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_create_errhandler
  subroutine MPI_Comm_call_errhandler(comm, errorcode, ierror)
    type(MPI_Comm) :: comm
    integer :: errorcode
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_comm_call_errhandler(comm, errorcode, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Comm_call_errhandler
  subroutine MPI_Errhandler_free(errhandler, ierror)
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_errhandler_free(errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Errhandler_free
  subroutine MPI_Errhandler_create(function, errhandler, ierror)
    external :: function
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_errhandler_create(function, errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Errhandler_create
  subroutine MPI_Errhandler_set(comm, errhandler, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_errhandler_set(comm, errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Errhandler_set
  subroutine MPI_Errhandler_get(comm, errhandler, ierror)
    type(MPI_Comm) :: comm
    type(MPI_Errhandler) :: errhandler
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_errhandler_get(comm, errhandler, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Errhandler_get
  subroutine MPI_Add_error_class(errorclass, ierror)
    integer :: errorclass
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_add_error_class(errorclass, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Add_error_class
  subroutine MPI_Add_error_code(errorclass, errorcode, ierror)
    integer :: errorclass
    integer :: errorcode
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_add_error_code(errorclass, errorcode, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Add_error_code
  subroutine MPI_Add_error_string(errorcode, string, ierror)
    integer :: errorcode
    character(len=*) :: string
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_add_error_string(errorcode, string, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Add_error_string
  subroutine MPI_Get_library_version(version, resultlen, ierror)
    character(len=*) :: version
    integer :: resultlen
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_get_library_version(version, resultlen, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Get_library_version
  subroutine MPI_Alloc_mem(size, info, baseptr, ierror)
    integer(kind=8) :: size
    type(MPI_Info) :: info
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: baseptr
    type(*), dimension(*) :: baseptr
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_alloc_mem(size, info, baseptr, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Alloc_mem
  subroutine MPI_Free_mem(base, ierror)
    !GCC$ ATTRIBUTES NO_ARG_CHECK :: base
    type(*), dimension(*) :: base
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_free_mem(base, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Free_mem
  subroutine MPI_Is_thread_main(flag, ierror)
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_is_thread_main(flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Is_thread_main
  subroutine MPI_Info_create(info, ierror)
    type(MPI_Info) :: info
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_create(info, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_create
  subroutine MPI_Info_set(info, key, value, ierror)
    type(MPI_Info) :: info
    character(len=*) :: key
    character(len=*) :: value
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_set(info, key, value, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_set
  subroutine MPI_Info_get(info, key, valuelen, value, flag, ierror)
    type(MPI_Info) :: info
    character(len=*) :: key
    integer :: valuelen
    character(len=*) :: value
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_get(info, key, valuelen, value, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_get
  subroutine MPI_Info_get_valuelen(info, key, valuelen, flag, ierror)
    type(MPI_Info) :: info
    character(len=*) :: key
    integer :: valuelen
    logical :: flag
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_get_valuelen(info, key, valuelen, flag, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_get_valuelen
  subroutine MPI_Info_get_nkeys(info, nkeys, ierror)
    type(MPI_Info) :: info
    integer :: nkeys
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_get_nkeys(info, nkeys, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_get_nkeys
  subroutine MPI_Info_get_nthkey(info, n, key, ierror)
    type(MPI_Info) :: info
    integer :: n
    character(len=*) :: key
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_get_nthkey(info, n, key, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_get_nthkey
  subroutine MPI_Info_delete(info, key, ierror)
    type(MPI_Info) :: info
    character(len=*) :: key
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_delete(info, key, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_delete
  subroutine MPI_Info_dup(info, newinfo, ierror)
    type(MPI_Info) :: info
    type(MPI_Info) :: newinfo
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_dup(info, newinfo, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_dup
  subroutine MPI_Info_free(info, ierror)
    type(MPI_Info) :: info
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_info_free(info, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Info_free
  subroutine MPI_Grequest_complete(request, ierror)
    type(MPI_Request) :: request
    integer, optional, intent(out) :: ierror
    integer :: qcg_ierror
    call qcg_grequest_complete(request, qcg_ierror)
    if (present(ierror)) ierror = qcg_ierror
  end subroutine MPI_Grequest_complete
end module mpi_f08
