! heat_kill.f90 — the Fortran kill-and-resume test's program: a 2D heat loop persisted with
! `use cairn` at every iteration. Arguments: steps, pause_at. At iteration pause_at (0: never) it
! overwrites half of the new version with garbage, prints "half <pause_at>" and waits on standard
! input, where heat_kill_test.sh kills it. It prints "start <iteration>" when it begins and the
! final field's checksums (sum and a weighted sum, as the bits of each double) when it ends.
program heat_kill
  use cairn
  implicit none
  integer, parameter :: n = 64
  type(cairn_ckpt) :: ck
  type(cairn_dual) :: u
  type(cairn_region) :: it_region
  real(c_double), pointer :: a(:, :), b(:, :)
  integer(c_int64_t), pointer :: it(:)
  integer(c_int64_t) :: version
  integer(c_int) :: rc
  integer :: steps, pause_at, i, j
  character(32) :: arg
  character(1) :: line
  real(c_double) :: s, w

  call get_command_argument(1, arg)
  read (arg, *) steps
  call get_command_argument(2, arg)
  read (arg, *) pause_at

  call cairn_check(cairn_ckpt_create(ck, name="heat_f", threads=1), "create")
  call cairn_check(cairn_ckpt_dual_create(ck, "u", 8_c_size_t * n * n, u), "dual region u")
  call cairn_check(cairn_ckpt_region_create(ck, "it", 8_c_size_t, it_region), "region it")
  call cairn_check(cairn_ckpt_open(ck), "open")
  call cairn_view(cairn_ckpt_region_data(it_region), it, [1])
  rc = cairn_ckpt_restore(ck, version)
  if (rc == CAIRN_E_NO_VERSION) then
    call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
    a = 0
    a(:, 1) = 1
    it(1) = 0
  else
    call cairn_check(rc, "restore")
  end if
  print '(a, i0)', "start ", it(1)
  flush (6)

  do while (it(1) < steps)
    call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
    call cairn_view(cairn_ckpt_dual_write(u), b, [n, n])
    b = a
    do j = 2, n - 1
      do i = 2, n - 1
        b(i, j) = a(i, j) + 0.2d0 * (a(i - 1, j) + a(i + 1, j) + a(i, j - 1) + a(i, j + 1) - 4 * a(i, j))
      end do
    end do
    if (it(1) + 1 == pause_at) then
      b(:, 1:n / 2) = -1
      print '(a, i0)', "half ", pause_at
      flush (6)
      read (5, '(a)') line  ! killed here
    end if
    it(1) = it(1) + 1
    call cairn_check(cairn_ckpt_commit(ck, version), "commit")
  end do

  call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])
  s = 0
  w = 0
  do j = 1, n
    do i = 1, n
      s = s + a(i, j)
      w = w + a(i, j) * (i + 3 * j)
    end do
  end do
  print '(a, z16.16, 1x, z16.16)', "checksum ", transfer(s, 0_c_int64_t), transfer(w, 0_c_int64_t)
  call cairn_check(cairn_ckpt_delete(ck), "delete")
end program
