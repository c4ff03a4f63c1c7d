! heat_mpi.f90 — the 2D heat loop of heat.f90 on MPI ranks, resilient with `use cairn_dist`.
!
!   cairn launch -n 2 -- build/release/fortran/heat_mpi_f [steps] [--crash-after K]
!
! The same 128 x 128 grid as heat.f90, its columns split across the ranks (each rank's columns plus
! one ghost column from each neighbour per step); rank 0 prints heat.f90's checksum line, equal to it
! digit for digit: every cell is computed with the same operations in the same order, and the sum
! runs through the ranks in memory order. The resilience, marked:
!   (1) each rank's columns are a dual region of a cairn_dist context: a (read) is the newest global
!       step, never written (ghosts gathered in DRAM), b (write) receives the new step;
!   (2) cairn_dist_restore is collective: every rank gets the same global step, or a fresh start;
!   (3) cairn_dist_commit is collective: when it returns the step is durable on every rank.
! Under `cairn launch` a dead rank ends the job and the launcher relaunches it with --resume; the job
! continues at the global step. --crash-after K shows it: in the first launch rank 1 announces its
! commit of step K and SIGKILLs itself.
program heat_mpi
  use mpi
  use cairn
  use cairn_dist
  implicit none
  integer, parameter :: n = 128
  interface
    integer(c_int) function c_raise(sig) bind(c, name="raise")
      import :: c_int
      integer(c_int), value :: sig
    end function
  end interface
  type(cairn_dist_ctx) :: d
  type(cairn_dist_dual) :: u
  real(c_double), pointer :: a(:, :), b(:, :)
  real(c_double), allocatable :: cur(:, :)
  real(c_double) :: total
  integer(c_int64_t) :: done
  integer(c_int) :: rc
  integer :: ierr, rank, nranks, j0, cols, up, down, i, j, k, steps, crash_after, start, s
  logical :: resumed
  character(32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  steps = 200
  crash_after = -1
  resumed = .false.
  k = 1
  do while (k <= command_argument_count())
    call get_command_argument(k, arg)
    if (arg == "--resume") then  ! added by cairn launch
      resumed = .true.
    else if (arg == "--crash-after") then
      k = k + 1
      call get_command_argument(k, arg)
      read (arg, *) crash_after
    else
      read (arg, *) steps
    end if
    k = k + 1
  end do
  j0 = rank * n / nranks + 1  ! my global columns j0 .. j0 + cols - 1
  cols = (rank + 1) * n / nranks - rank * n / nranks
  up = merge(rank - 1, MPI_PROC_NULL, rank > 0)
  down = merge(rank + 1, MPI_PROC_NULL, rank + 1 < nranks)

  call cairn_check(cairn_dist_create(d, MPI_COMM_WORLD, name="heat_mpi_f"), "create")
  call cairn_check(cairn_dist_dual_create(d, "u", 8_c_size_t * n * cols, u), "dual region u")  ! (1)
  call cairn_check(cairn_dist_open(d), "open")
  rc = cairn_dist_restore(d, done)  ! (2)
  if (rc == CAIRN_E_NO_VERSION) then
    call cairn_view(cairn_dist_dual_read(u), a, [n, cols])
    a = 0
    if (j0 == 1) a(:, 1) = 1  ! a hot edge
  else
    call cairn_check(rc, "restore")
  end if

  start = int(done)
  allocate (cur(n, 0:cols + 1))  ! my columns between two ghost columns
  do s = start, steps - 1
    call cairn_view(cairn_dist_dual_read(u), a, [n, cols])
    call cairn_view(cairn_dist_dual_write(u), b, [n, cols])
    cur(:, 1:cols) = a
    call MPI_Sendrecv(cur(:, 1), n, MPI_DOUBLE_PRECISION, up, 0, cur(:, cols + 1), n, MPI_DOUBLE_PRECISION, down, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(cur(:, cols), n, MPI_DOUBLE_PRECISION, down, 1, cur(:, 0), n, MPI_DOUBLE_PRECISION, up, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    b = a
    do j = max(1, 2 - j0 + 1), min(cols, n - j0)  ! global columns 2 .. n - 1
      do i = 2, n - 1
        b(i, j) = cur(i, j) + 0.2d0 * (cur(i - 1, j) + cur(i + 1, j) + cur(i, j - 1) + cur(i, j + 1) - 4 * cur(i, j))
      end do
    end do
    call cairn_check(cairn_dist_commit(d), "commit")  ! (3)
    if (.not. resumed .and. rank == 1 .and. s + 1 == crash_after) then
      print '(a, i0, a)', "heat_mpi_f: rank 1 committed step ", s + 1, " and kills itself"
      flush (6)
      rc = c_raise(9_c_int)
    end if
  end do

  ! The checksum: a running sum through the ranks in memory order, as heat.f90's sum(a) adds the cells.
  total = 0
  if (rank > 0) call MPI_Recv(total, 1, MPI_DOUBLE_PRECISION, rank - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call cairn_view(cairn_dist_dual_read(u), a, [n, cols])
  do j = 1, cols
    do i = 1, n
      total = total + a(i, j)
    end do
  end do
  if (nranks > 1) call MPI_Send(total, 1, MPI_DOUBLE_PRECISION, mod(rank + 1, nranks), 2, MPI_COMM_WORLD, ierr)
  if (nranks > 1 .and. rank == 0) &
    call MPI_Recv(total, 1, MPI_DOUBLE_PRECISION, nranks - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  if (rank == 0) print '(a, i0, a, i0, a, i0, a, es22.15)', "heat_mpi_f: ", nranks, " ranks, iterations ", start, &
    "..", steps, ", checksum ", total
  call cairn_check(cairn_dist_delete(d), "delete")  ! before MPI_Finalize
  call MPI_Finalize(ierr)
end program
