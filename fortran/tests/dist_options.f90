! dist_options.f90 — the Fortran module cairn_dist at 2 ranks: every option crosses the bind(c) struct
! to the C API (a bad redundancy, flag or parity group is refused with a message naming it; name, dir,
! partner redundancy on simulated nodes of one rank each commit and restore), and the calls' order is
! checked (commit before open: CAIRN_E_NOT_READY). Run under mpirun -n 2 with $CAIRN_POOL_DIR set;
! prints "dist_options: ok" on rank 0 when every check passed on every rank.
program dist_options
  use mpi
  use cairn
  use cairn_dist
  implicit none
  type(cairn_dist_ctx) :: d
  type(cairn_dist_dual) :: u
  real(c_double), pointer :: a(:), b(:)
  integer(c_int64_t) :: v
  integer :: ierr, rank, bad, all_bad
  character(512) :: dir
  logical :: there

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_environment_variable("CAIRN_POOL_DIR", dir)
  bad = 0
  call expect(cairn_dist_create(d, MPI_COMM_WORLD, redundancy=7), CAIRN_E_INVALID_ARGUMENT, "redundancy")
  call expect(cairn_dist_create(d, MPI_COMM_WORLD, flags=1024), CAIRN_E_INVALID_ARGUMENT, "flags")
  call expect(cairn_dist_create(d, MPI_COMM_WORLD, xor_group=1), CAIRN_E_INVALID_ARGUMENT, "xor_group")
  call expect(cairn_dist_create(d, MPI_COMM_WORLD, strategy="no-such"), CAIRN_E_INVALID_ARGUMENT, "no-such")

  ! Partner copies on simulated nodes of one rank: storage in <dir>/fopts/node<rank>/fopts_job.n2.r<rank>.*
  call cairn_check(cairn_dist_create(d, MPI_COMM_WORLD, strategy="in-place", name="fopts_job", &
                                     dir=trim(dir)//"/fopts", redundancy=CAIRN_DIST_PARTNER, ranks_per_node=1), &
                   "create")
  call cairn_check(cairn_dist_dual_create(d, "u", 8_c_size_t * 100, u), "dual u")
  call expect(cairn_dist_commit(d), CAIRN_E_NOT_READY, "open")
  call cairn_check(cairn_dist_open(d), "open")
  call expect(cairn_dist_restore(d, v), CAIRN_E_NO_VERSION, "")
  call cairn_view(cairn_dist_dual_write(u), b, [100])
  b = rank + 0.5d0
  call cairn_check(cairn_dist_commit(d, v), "commit")
  if (v /= 1) bad = bad + 1
  call cairn_check(cairn_dist_delete(d), "delete")
  call cairn_check(cairn_dist_create(d, MPI_COMM_WORLD, strategy="in-place", name="fopts_job", &
                                     dir=trim(dir)//"/fopts", redundancy=CAIRN_DIST_PARTNER, ranks_per_node=1), &
                   "create again")
  call cairn_check(cairn_dist_dual_create(d, "u", 8_c_size_t * 100, u), "dual u again")
  call cairn_check(cairn_dist_open(d), "open again")
  call cairn_check(cairn_dist_restore(d, v), "restore")
  call cairn_view(cairn_dist_dual_read(u), a, [100])
  if (v /= 1 .or. any(a /= rank + 0.5d0)) then
    print '(a, i0, a, i0)', "rank ", rank, ": restored version ", v
    bad = bad + 1
  end if
  call cairn_check(cairn_dist_delete(d), "delete again")
  block
    character(600) :: f
    write (f, '(a, i0, a, i0, a)') trim(dir)//"/fopts/node", rank, "/fopts_job.n2.r", rank, ".a.pool"
    inquire (file=trim(f), exist=there)
    if (.not. there) then
      print '(a)', "missing "//trim(f)//": name, dir or ranks_per_node did not reach the C API"
      bad = bad + 1
    end if
  end block

  call MPI_Allreduce(bad, all_bad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. all_bad == 0) print '(a)', "dist_options: ok"
  if (rank == 0 .and. all_bad /= 0) print '(a, i0, a)', "dist_options: ", all_bad, " checks FAILED"
  call MPI_Finalize(ierr)
  if (all_bad /= 0) error stop 1

contains

  subroutine expect(rc, want, needle)
    integer(c_int), intent(in) :: rc, want
    character(*), intent(in) :: needle
    if (rc /= want .or. index(cairn_errormsg(), needle) == 0) then
      print '(a, i0, a, i0, a)', "got ", rc, " expected ", want, ": "//cairn_errormsg()//" (wanted '"//needle//"')"
      bad = bad + 1
    end if
  end subroutine
end program
