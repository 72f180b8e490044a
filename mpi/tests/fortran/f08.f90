! A Fortran 2008 program over the `mpi_f08` module: derived-type handles and
! statuses, optional ierror, point-to-point, requests, collectives (MPI_IN_PLACE),
! a split, a derived type, strings, an operation of the program's own, logical
! arguments. Each rank checks its results and prints `rank R: ...` lines, compared
! with the same source under Open MPI.
module f08_ops
  use mpi_f08
  implicit none
contains
  ! The largest absolute value, as MPI 3.1's mpi_f08 user function.
  subroutine absmax(invec, inoutvec, len, datatype)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    b = max(abs(a), abs(b))
  end subroutine absmax
end module f08_ops

program f08
  use mpi_f08
  use f08_ops
  implicit none
  integer :: ierr, rank, size, i, n, next, prev, total, checks, failed, cnt, subrank, subsize
  type(MPI_Comm) :: sub, cart
  type(MPI_Status) :: status, statuses(2)
  type(MPI_Request) :: reqs(2)
  type(MPI_Datatype) :: vec
  type(MPI_Info) :: info
  type(MPI_Op) :: op
  integer :: sendv(4), recvv(4), gathered(16), mat(4, 3), col(3), dims(1), coords(1)
  double precision :: d(3), t
  character(len=MPI_MAX_OBJECT_NAME) :: cname
  character(len=64) :: val
  integer :: nlen, nkeys
  logical :: flag, periods(1)
  integer(kind=MPI_ADDRESS_KIND) :: aval, extra
  integer :: key

  checks = 0
  failed = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  call check(ierr == MPI_SUCCESS, 'ierror given')
  next = mod(rank + 1, size)
  prev = mod(rank + size - 1, size)

  ! A ring with a status.
  if (rank == 0) then
    call MPI_Send(rank * 10, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD)
    call MPI_Recv(n, 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status)
  else
    call MPI_Recv(n, 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status)
    call MPI_Send(rank * 10, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD)
  end if
  call check(n == prev * 10 .and. status%MPI_SOURCE == prev .and. status%MPI_TAG == 3, 'ring')
  call MPI_Get_count(status, MPI_INTEGER, cnt)
  call check(cnt == 1, 'get_count')
  print '(a,i0,a,i0,a,i0)', 'rank ', rank, ': ring got ', n, ' from ', status%MPI_SOURCE

  ! Non-blocking both ways, statuses of Waitall, a request compared with null.
  sendv = [rank, rank + 1, rank + 2, rank + 3]
  call MPI_Irecv(recvv, 4, MPI_INTEGER, prev, 9, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(sendv, 4, MPI_INTEGER, next, 9, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitall(2, reqs, statuses)
  call check(all(recvv == [prev, prev + 1, prev + 2, prev + 3]), 'isend/irecv')
  call check(statuses(1)%MPI_SOURCE == prev .and. reqs(1) == MPI_REQUEST_NULL, 'waitall')
  call MPI_Isend(sendv, 1, MPI_INTEGER, next, 10, MPI_COMM_WORLD, reqs(2))
  call MPI_Recv(n, 1, MPI_INTEGER, prev, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call MPI_Test(reqs(2), flag, MPI_STATUS_IGNORE)
  if (.not. flag) call MPI_Wait(reqs(2), MPI_STATUS_IGNORE)
  call check(n == prev .and. reqs(2) == MPI_REQUEST_NULL, 'status_ignore, test')
  call MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, flag, status)
  call check(.not. flag, 'iprobe of nothing')

  ! Collectives.
  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(total == size * (size + 1) / 2, 'allreduce')
  d = [1.5d0 * rank, 2d0, -1d0 * rank]
  call MPI_Allreduce(MPI_IN_PLACE, d, 3, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD)
  call check(d(1) == 1.5d0 * (size - 1) .and. d(2) == 2d0 .and. d(3) == 0d0, 'in_place')
  n = 0
  if (rank == 0) n = 77
  call MPI_Bcast(n, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call check(n == 77, 'bcast')
  call MPI_Gather(sendv, 4, MPI_INTEGER, gathered, 4, MPI_INTEGER, 0, MPI_COMM_WORLD)
  if (rank == 0) call check(all(gathered(5:8) == [1, 2, 3, 4]), 'gather')
  call MPI_Allgather(rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, MPI_COMM_WORLD)
  call check(all(gathered(1:size) == [(i, i = 0, size - 1)]), 'allgather')
  call MPI_Op_create(absmax, .true., op)
  sendv = [-rank, rank, 0, 1]
  call MPI_Allreduce(sendv, recvv, 4, MPI_INTEGER, op, MPI_COMM_WORLD)
  call check(all(recvv == [size - 1, size - 1, 0, 1]), 'user op')
  call MPI_Op_free(op)
  call check(op == MPI_OP_NULL, 'op_free')
  call MPI_Barrier(MPI_COMM_WORLD)
  print '(a,i0,a,i0,a,f5.2)', 'rank ', rank, ': allreduce ', total, ' max ', d(1)

  ! A split into even and odd ranks; a ring as a Cartesian topology.
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, sub)
  call MPI_Comm_rank(sub, subrank)
  call MPI_Comm_size(sub, subsize)
  call MPI_Allreduce(rank, n, 1, MPI_INTEGER, MPI_SUM, sub)
  print '(a,i0,a,i0,a,i0,a,i0)', 'rank ', rank, ': split rank ', subrank, ' of ', subsize, ' sum ', n
  call MPI_Comm_free(sub)
  call check(sub == MPI_COMM_NULL, 'comm_free')
  dims = [size]
  periods = [.true.]
  call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .false., cart)
  call MPI_Cart_coords(cart, rank, 1, coords)
  call MPI_Cart_get(cart, 1, dims, periods, coords)
  call check(cart /= MPI_COMM_NULL .and. coords(1) == rank .and. periods(1), 'cart')
  call MPI_Comm_free(cart)

  ! A row of a column-major matrix as a vector type.
  mat = reshape([(i, i = 1, 12)], [4, 3])
  call MPI_Type_vector(3, 1, 4, MPI_INTEGER, vec)
  call MPI_Type_commit(vec)
  call MPI_Sendrecv(mat(2, 1), 1, vec, next, 4, col, 3, MPI_INTEGER, prev, 4, &
                    MPI_COMM_WORLD, status)
  call check(all(col == [2, 6, 10]), 'vector row')
  call MPI_Type_free(vec)
  call check(vec == MPI_DATATYPE_NULL, 'type_free')

  ! Strings, info, the clock.
  call MPI_Comm_dup(MPI_COMM_WORLD, sub)
  call MPI_Comm_set_name(sub, 'my dup   ')
  call MPI_Comm_get_name(sub, cname, nlen)
  call check(cname == 'my dup' .and. nlen == 6, 'comm name')
  call MPI_Comm_free(sub)
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'color', 'blue')
  call MPI_Info_get(info, 'color', 64, val, flag)
  call MPI_Info_get_nkeys(info, nkeys)
  call check(flag .and. val == 'blue' .and. nkeys == 1, 'info')
  call MPI_Info_free(info)
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, aval, flag)
  call check(flag .and. aval >= 32767, 'tag_ub')
  extra = 0
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, key, extra)
  aval = 9
  call MPI_Comm_set_attr(MPI_COMM_WORLD, key, aval)
  call MPI_Comm_dup(MPI_COMM_WORLD, sub)
  call MPI_Comm_get_attr(sub, key, aval, flag)
  call check(flag .and. aval == 9, 'dup_fn attribute')
  call MPI_Comm_free(sub)
  call MPI_Comm_free_keyval(key)
  t = MPI_Wtime()
  call check(t >= 0d0 .and. MPI_Wtime() >= t .and. MPI_Wtick() > 0d0, 'wtime')

  print '(a,i0,a,i0,a,i0,a)', 'rank ', rank, ': f08: ', checks, ' checks, ', failed, ' failed'
  call MPI_Finalize()

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (.not. ok) then
      failed = failed + 1
      print '(a,i0,a,a)', 'rank ', rank, ': FAIL ', what
    end if
  end subroutine check
end program f08
