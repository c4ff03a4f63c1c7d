! fortran_heat_bench.f90 — issue 32's Fortran goal: the heat loop of examples/heat.f90 persisted every
! iteration with in-place, against the same loop on plain arrays, timed in the same run (the median of
! `runs` alternating pairs). bench/fortran_heat_bench.sh builds and runs it.
!   fortran_heat_bench [n] [steps] [runs]     (default 1024 100 7; pools in $CAIRN_POOL_DIR)
program fortran_heat_bench
  use cairn
  implicit none
  integer :: n, steps, runs, r
  real(c_double), allocatable :: plain(:), pooled(:), persisted(:)
  character(32) :: arg

  n = 1024
  steps = 100
  runs = 7
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) steps
  end if
  if (command_argument_count() >= 3) then
    call get_command_argument(3, arg)
    read (arg, *) runs
  end if
  allocate (plain(runs), pooled(runs), persisted(runs))
  do r = 1, runs
    plain(r) = run_plain()
    pooled(r) = run_pooled(r)
    persisted(r) = run_persisted(r)
  end do
  print '(a, i0, a, i0, a, i0, a)', "fortran heat ", n, "^2, ", steps, " steps, median of ", runs, " runs:"
  print '(a, f9.4, a)', "  unpersisted, allocate'd arrays          ", median(plain), " s"
  print '(a, f9.4, a)', "  unpersisted, two regions of a pool      ", median(pooled), " s"
  print '(a, f9.4, a)', "  persisted every iteration (in-place)    ", median(persisted), " s"
  print '(a, f7.4, a, f7.4)', "  ratio persisted / unpersisted: ", median(persisted) / median(plain), &
    " (allocate'd), ", median(persisted) / median(pooled)

contains

  subroutine sweep(a, b)
    real(c_double), intent(in) :: a(:, :)
    real(c_double), intent(out) :: b(:, :)
    integer :: i, j
    b = a
    do j = 2, n - 1
      do i = 2, n - 1
        b(i, j) = a(i, j) + 0.2d0 * (a(i - 1, j) + a(i + 1, j) + a(i, j - 1) + a(i, j + 1) - 4 * a(i, j))
      end do
    end do
  end subroutine

  real(c_double) function run_plain() result(seconds)
    real(c_double), allocatable, target :: x(:, :), y(:, :)
    real(c_double), pointer :: a(:, :), b(:, :), t(:, :)
    integer(8) :: t0, t1, rate
    integer :: s
    allocate (x(n, n), y(n, n))
    x = 0
    x(:, 1) = 1
    y = 0  ! touched before the clock, as the pool pages are
    a => x
    b => y
    call system_clock(t0, rate)
    do s = 1, steps
      call sweep(a, b)
      t => a
      a => b
      b => t
    end do
    call system_clock(t1)
    seconds = real(t1 - t0, c_double) / rate
    if (sum(a) < 0) print *, "impossible"  ! keeps the loop
  end function

  ! The same loop on two regions of an in-place pool, never committed: the memory of run_persisted
  ! without the persistence.
  real(c_double) function run_pooled(k) result(seconds)
    integer, intent(in) :: k
    type(cairn_ckpt) :: ck
    type(cairn_region) :: rx, ry
    real(c_double), pointer :: a(:, :), b(:, :), t(:, :)
    integer(8) :: t0, t1, rate
    integer :: s
    character(32) :: name
    write (name, '(a, i0)') "fortran_heat_pooled", k
    call cairn_check(cairn_ckpt_create(ck, strategy="in-place", name=trim(name)), "create")
    call cairn_check(cairn_ckpt_region_create(ck, "x", 8_c_size_t * n * n, rx), "region x")
    call cairn_check(cairn_ckpt_region_create(ck, "y", 8_c_size_t * n * n, ry), "region y")
    call cairn_check(cairn_ckpt_open(ck), "open")
    call cairn_view(cairn_ckpt_region_data(rx), a, [n, n])
    call cairn_view(cairn_ckpt_region_data(ry), b, [n, n])
    a = 0
    a(:, 1) = 1
    b = 0
    call system_clock(t0, rate)
    do s = 1, steps
      call sweep(a, b)
      t => a
      a => b
      b => t
    end do
    call system_clock(t1)
    seconds = real(t1 - t0, c_double) / rate
    if (sum(a) < 0) print *, "impossible"
    call cairn_check(cairn_ckpt_delete(ck), "delete")
  end function

  real(c_double) function run_persisted(k) result(seconds)
    integer, intent(in) :: k
    type(cairn_ckpt) :: ck
    type(cairn_dual) :: u
    real(c_double), pointer :: a(:, :), b(:, :)
    integer(8) :: t0, t1, rate
    integer :: s
    character(32) :: name
    write (name, '(a, i0)') "fortran_heat_bench", k
    call cairn_check(cairn_ckpt_create(ck, strategy="in-place", name=trim(name)), "create")
    call cairn_check(cairn_ckpt_dual_create(ck, "u", 8_c_size_t * n * n, u), "dual u")
    call cairn_check(cairn_ckpt_open(ck), "open")
    call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
    a = 0
    a(:, 1) = 1
    call system_clock(t0, rate)
    do s = 1, steps
      call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
      call cairn_view(cairn_ckpt_dual_write(u), b, [n, n])
      call sweep(a, b)
      call cairn_check(cairn_ckpt_commit(ck), "commit")
    end do
    call system_clock(t1)
    seconds = real(t1 - t0, c_double) / rate
    call cairn_check(cairn_ckpt_delete(ck), "delete")
  end function

  real(c_double) function median(x)
    real(c_double), intent(in) :: x(:)
    real(c_double) :: y(size(x)), t
    integer :: i, j
    y = x
    do i = 2, size(y)
      t = y(i)
      j = i - 1
      do while (j >= 1)
        if (y(j) <= t) exit
        y(j + 1) = y(j)
        j = j - 1
      end do
      y(j + 1) = t
    end do
    median = y((size(y) + 1) / 2)
  end function
end program
