! heat.f90 — the 2D heat loop made resilient from Fortran with `use cairn`: arrays that are persistent memory.
!
!   build/release/fortran/heat_f [steps]   # run twice: the second run resumes what the first committed
!
! The field is a cairn dual region: `a` (the read version) is the last committed iteration, the loop
! writes all of `b` (the write version), and cairn_ckpt_commit makes it durable and swaps the two, so
! the views are taken again every iteration. Kill the program at any moment: the next run restores the
! last committed iteration bit for bit and ends with the same checksum as an uninterrupted run.
! $CAIRN_STRATEGY picks the strategy, $CAIRN_POOL_DIR the directory.
program heat
  use cairn
  implicit none
  integer, parameter :: n = 128
  type(cairn_ckpt) :: ck
  type(cairn_dual) :: u
  type(cairn_region) :: done
  real(c_double), pointer :: a(:, :), b(:, :)
  integer(c_int64_t), pointer :: it(:)
  integer(c_int) :: rc
  integer :: steps, start, i, j
  character(32) :: arg

  steps = 200
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) steps
  end if

  call cairn_check(cairn_ckpt_create(ck, name="heat_f"), "create")
  call cairn_check(cairn_ckpt_dual_create(ck, "u", 8_c_size_t * n * n, u), "dual region u")
  call cairn_check(cairn_ckpt_region_create(ck, "it", 8_c_size_t, done), "region it")
  call cairn_check(cairn_ckpt_open(ck), "open")
  call cairn_view(cairn_ckpt_region_data(done), it, [1])
  rc = cairn_ckpt_restore(ck)
  if (rc == CAIRN_E_NO_VERSION) then  ! nothing committed yet: the initial state
    call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
    a = 0
    a(:, 1) = 1  ! a hot edge
    it(1) = 0
  else
    call cairn_check(rc, "restore")
  end if

  start = int(it(1))
  do while (it(1) < steps)
    call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
    call cairn_view(cairn_ckpt_dual_write(u), b, [n, n])
    b = a
    do j = 2, n - 1
      do i = 2, n - 1
        b(i, j) = a(i, j) + 0.2d0 * (a(i - 1, j) + a(i + 1, j) + a(i, j - 1) + a(i, j + 1) - 4 * a(i, j))
      end do
    end do
    it(1) = it(1) + 1
    call cairn_check(cairn_ckpt_commit(ck), "commit")  ! durable from here
  end do

  call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
  print '(a, i0, a, i0, a, es22.15)', "heat_f: iterations ", start, "..", steps, ", checksum ", sum(a)
  call cairn_check(cairn_ckpt_delete(ck), "delete")
end program
