! A Fortran program over the `mpi` module: point-to-point with statuses,
! non-blocking requests, collectives (with MPI_IN_PLACE), a split, a derived
! type, strings. Each rank checks its results against values computed locally
! and prints `rank R: ...` lines, compared with the same source under Open MPI.
program basics
  use mpi
  implicit none
  integer :: ierr, rank, size, i, n, next, prev, sum, checks, failed
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 2), reqs(2)
  integer :: sendv(4), recvv(4), gathered(16), sub, subrank, subsize, vec, cnt
  double precision :: d(3), t
  character(len=MPI_MAX_ERROR_STRING) :: text
  character(len=MPI_MAX_PROCESSOR_NAME) :: pname
  integer :: tlen, plen, mat(4, 3), col(3), info, nlen, nkeys
  logical :: flag
  character(len=MPI_MAX_OBJECT_NAME) :: cname
  character(len=64) :: val
  integer(kind=MPI_ADDRESS_KIND) :: a

  checks = 0
  failed = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  next = mod(rank + 1, size)
  prev = mod(rank + size - 1, size)

  ! A ring with a status.
  if (rank == 0) then
    call MPI_SEND(rank * 10, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD, ierr)
    call MPI_RECV(n, 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
  else
    call MPI_RECV(n, 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
    call MPI_SEND(rank * 10, 1, MPI_INTEGER, next, 3, MPI_COMM_WORLD, ierr)
  end if
  call check(n == prev * 10 .and. status(MPI_SOURCE) == prev .and. status(MPI_TAG) == 3, 'ring')
  call MPI_GET_COUNT(status, MPI_INTEGER, cnt, ierr)
  call check(cnt == 1, 'get_count')
  print '(a,i0,a,i0,a,i0)', 'rank ', rank, ': ring got ', n, ' from ', status(MPI_SOURCE)

  ! Non-blocking both ways, statuses of Waitall.
  sendv = (/ rank, rank + 1, rank + 2, rank + 3 /)
  call MPI_IRECV(recvv, 4, MPI_INTEGER, prev, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(sendv, 4, MPI_INTEGER, next, 9, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_WAITALL(2, reqs, statuses, ierr)
  call check(all(recvv == (/ prev, prev + 1, prev + 2, prev + 3 /)), 'isend/irecv')
  call check(statuses(MPI_SOURCE, 1) == prev .and. reqs(1) == MPI_REQUEST_NULL, 'waitall')
  call MPI_ISEND(sendv, 1, MPI_INTEGER, next, 10, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_RECV(n, 1, MPI_INTEGER, prev, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_WAIT(reqs(2), MPI_STATUS_IGNORE, ierr)
  call check(n == prev, 'status_ignore')

  ! Collectives.
  call MPI_ALLREDUCE(rank + 1, sum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(sum == size * (size + 1) / 2, 'allreduce')
  d = (/ 1.5d0 * rank, 2d0, -1d0 * rank /)
  call MPI_ALLREDUCE(MPI_IN_PLACE, d, 3, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(d(1) == 1.5d0 * (size - 1) .and. d(2) == 2d0 .and. d(3) == 0d0, 'in_place')
  n = 0
  if (rank == 0) n = 77
  call MPI_BCAST(n, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(n == 77, 'bcast')
  call MPI_GATHER(sendv, 4, MPI_INTEGER, gathered, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    call check(all(gathered(5:8) == (/ 1, 2, 3, 4 /)), 'gather')
  end if
  call MPI_ALLGATHER(rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call check(all(gathered(1:size) == (/ (i, i = 0, size - 1) /)), 'allgather')
  call MPI_REDUCE(rank, n, 1, MPI_INTEGER, MPI_MAX, size - 1, MPI_COMM_WORLD, ierr)
  if (rank == size - 1) call check(n == size - 1, 'reduce')
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  print '(a,i0,a,i0,a,f5.2)', 'rank ', rank, ': allreduce ', sum, ' max ', d(1)

  ! A split into even and odd ranks.
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), -rank, sub, ierr)
  call MPI_COMM_RANK(sub, subrank, ierr)
  call MPI_COMM_SIZE(sub, subsize, ierr)
  call MPI_ALLREDUCE(rank, n, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
  print '(a,i0,a,i0,a,i0,a,i0)', 'rank ', rank, ': split rank ', subrank, ' of ', subsize, ' sum ', n
  call MPI_COMM_FREE(sub, ierr)
  call check(sub == MPI_COMM_NULL, 'comm_free')

  ! A row of a column-major matrix as a vector type.
  mat = reshape((/ (i, i = 1, 12) /), (/ 4, 3 /))
  call MPI_TYPE_VECTOR(3, 1, 4, MPI_INTEGER, vec, ierr)
  call MPI_TYPE_COMMIT(vec, ierr)
  call MPI_SENDRECV(mat(2, 1), 1, vec, next, 4, col, 3, MPI_INTEGER, prev, 4, &
                    MPI_COMM_WORLD, status, ierr)
  call check(all(col == (/ 2, 6, 10 /)), 'vector row')
  call MPI_TYPE_FREE(vec, ierr)

  ! Strings and the clock.
  call MPI_ERROR_STRING(MPI_ERR_TAG, text, tlen, ierr)
  call check(tlen > 0 .and. text(tlen + 1:) == ' ', 'error_string')
  call MPI_GET_PROCESSOR_NAME(pname, plen, ierr)
  call check(plen > 0, 'processor_name')
  t = MPI_WTIME()
  call check(t >= 0d0 .and. MPI_WTIME() >= t .and. MPI_WTICK() > 0d0, 'wtime')
  call MPI_INITIALIZED(flag, ierr)
  call check(flag, 'initialized')

  ! Names and info: strings in and out, blank-padded; a function of MPI_Aint.
  call MPI_COMM_DUP(MPI_COMM_WORLD, sub, ierr)
  call MPI_COMM_SET_NAME(sub, 'my dup   ', ierr)
  call MPI_COMM_GET_NAME(sub, cname, nlen, ierr)
  call check(cname == 'my dup' .and. nlen == 6, 'comm name')
  call MPI_COMM_FREE(sub, ierr)
  call MPI_INFO_CREATE(info, ierr)
  call MPI_INFO_SET(info, 'color', 'blue', ierr)
  call MPI_INFO_GET(info, 'color', 64, val, flag, ierr)
  call MPI_INFO_GET_NKEYS(info, nkeys, ierr)
  call check(flag .and. val == 'blue' .and. nkeys == 1, 'info')
  call MPI_INFO_FREE(info, ierr)
  a = 100
  call check(MPI_AINT_ADD(a, 28_MPI_ADDRESS_KIND) == 128, 'aint_add')

  print '(a,i0,a,i0,a,i0,a)', 'rank ', rank, ': fortran: ', checks, ' checks, ', failed, ' failed'
  call MPI_FINALIZE(ierr)

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

end program basics
