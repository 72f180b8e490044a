! Attribute caching from Fortran over the `mpi` module: keyvals with Fortran copy
! and delete procedures (address-sized values, kept as they are), the predefined
! callbacks, MPI_TAG_UB as a value, MPI-1's INTEGER attributes, an error handler
! of the program's own. Compared line by line with Open MPI.
module cbs
  implicit none
  integer :: me = -1
contains
  subroutine mycopy(oldcomm, keyval, extra, valin, valout, flag, ierr)
    use mpi
    integer :: oldcomm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra, valin, valout
    logical :: flag
    valout = valin + extra
    flag = .true.
    ierr = MPI_SUCCESS
  end subroutine mycopy
  subroutine mydelete(comm, keyval, val, extra, ierr)
    use mpi
    integer :: comm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: val, extra
    print '(a,i0,a,a,i0)', 'rank ', me, ': ', 'deleted value ', val
    ierr = MPI_SUCCESS
  end subroutine mydelete
  subroutine myhandler(comm, code)
    integer :: comm, code
    print '(a,i0,a,a,i0)', 'rank ', me, ': ', 'handler got class ', code
  end subroutine myhandler
end module cbs

program attrs
  use mpi
  use cbs
  implicit none
  integer :: ierr, key, key2, dup, eh, old77, v77, rank
  integer(kind=MPI_ADDRESS_KIND) :: v, got, extra
  logical :: flag
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  me = rank
  extra = 100
  call MPI_COMM_CREATE_KEYVAL(mycopy, mydelete, key, extra, ierr)
  v = 42
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, key, v, ierr)
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, key, got, flag, ierr)
  print '(a,i0,a,a,i0,a,l1)', 'rank ', me, ': ', 'got ', got, ' ', flag
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  call MPI_COMM_GET_ATTR(dup, key, got, flag, ierr)
  print '(a,i0,a,a,i0,a,l1)', 'rank ', me, ': ', 'dup got ', got, ' ', flag
  call MPI_COMM_FREE(dup, ierr)
  call MPI_COMM_CREATE_KEYVAL(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key2, extra, ierr)
  call MPI_COMM_SET_ATTR(MPI_COMM_WORLD, key2, v, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  call MPI_COMM_GET_ATTR(dup, key2, got, flag, ierr)
  print '(a,i0,a,a,l1)', 'rank ', me, ': ', 'null copy: present ', flag
  call MPI_COMM_FREE(dup, ierr)
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, MPI_TAG_UB, got, flag, ierr)
  print '(a,i0,a,a,l1,a,l1)', 'rank ', me, ': ', 'tag_ub big ', got >= 32767, ' ', flag
  call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, got, flag, ierr)
  print '(a,i0,a,a,i0,a,l1)', 'rank ', me, ': ', 'wtime_is_global ', got, ' ', flag
  call MPI_ATTR_GET(MPI_COMM_WORLD, MPI_TAG_UB, v77, flag, ierr)
  print '(a,i0,a,a,l1)', 'rank ', me, ': ', 'attr_get tag_ub big ', v77 >= 32767
  call MPI_KEYVAL_CREATE(MPI_DUP_FN, MPI_NULL_DELETE_FN, old77, 0, ierr)
  call MPI_ATTR_PUT(MPI_COMM_WORLD, old77, 5, ierr)
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  call MPI_ATTR_GET(dup, old77, v77, flag, ierr)
  print '(a,i0,a,a,i0,a,l1)', 'rank ', me, ': ', 'mpi-1 dup ', v77, ' ', flag
  call MPI_COMM_FREE(dup, ierr)
  call MPI_COMM_DELETE_ATTR(MPI_COMM_WORLD, key, ierr)
  call MPI_COMM_CREATE_ERRHANDLER(myhandler, eh, ierr)
  call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, eh, ierr)
  call MPI_SEND(v, 1, MPI_INTEGER, 99, 0, MPI_COMM_WORLD, ierr)
  print '(a,i0,a)', 'rank ', rank, ': fortran attributes: 0 checks, 0 failed'
  call MPI_FINALIZE(ierr)
end program attrs
