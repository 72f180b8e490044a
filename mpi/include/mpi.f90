! The `mpi` module of qcg (`use mpi`): the constants and sentinels of mpif.h.
! It declares no explicit interfaces, so buffers of any type pass as they do
! with mpif.h (qcg-mpif90 adds -fallow-argument-mismatch). `use mpi_f08` is in
! mpi_f08.f90.
module mpi
  implicit none
  include 'mpif.h'
end module mpi
