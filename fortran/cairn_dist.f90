! cairn_dist.f90 — the Fortran module `cairn_dist` (use cairn_dist, beside use cairn): the MPI layer for
! Fortran MPI codes, ISO_C_BINDING over the C API of cairn/dist.h. Many ranks, one version: every rank
! persists its part, the collective commit makes a version global, and after any failure every rank
! restores the same global version. Regions are Fortran arrays of any rank on the persistent memory
! itself (cairn_view of module cairn).
!
!   use mpi                                   ! or mpi_f08: pass comm%MPI_VAL
!   use cairn
!   use cairn_dist
!   type(cairn_dist_ctx) :: d
!   type(cairn_dist_dual) :: u
!   call cairn_check(cairn_dist_create(d, MPI_COMM_WORLD, name="heat"), "create")    ! collective
!   call cairn_check(cairn_dist_dual_create(d, "u", 8_c_size_t * nx * ny, u), "dual u")
!   call cairn_check(cairn_dist_open(d), "open")                                      ! collective
!   rc = cairn_dist_restore(d, version)       ! collective; CAIRN_E_NO_VERSION on every rank: fresh start
!   do
!     call cairn_view(cairn_dist_dual_read(u), a, [nx, ny])   ! the newest global version (never written)
!     call cairn_view(cairn_dist_dual_write(u), b, [nx, ny])  ! this iteration: write all of it
!     ... b from a ...
!     call cairn_check(cairn_dist_commit(d, version), "commit")  ! collective: global once it returns
!   end do
!   call cairn_check(cairn_dist_delete(d), "delete")          ! before MPI_Finalize
!
! The communicator is the Fortran integer handle (MPI_COMM_WORLD of `use mpi`, comm%MPI_VAL of
! mpi_f08), converted with MPI_Comm_f2c inside. Codes and messages are those of module cairn
! (CAIRN_E_*, cairn_errormsg, cairn_strerror, cairn_check). Every rank calls the collective functions
! (create, open, restore, commit) in the same order; each fails on every rank when it fails on one.
module cairn_dist
  use, intrinsic :: iso_c_binding
  implicit none
  private

  public :: cairn_dist_ctx, cairn_dist_region, cairn_dist_dual
  public :: cairn_dist_create, cairn_dist_delete, cairn_dist_region_create, cairn_dist_dual_create
  public :: cairn_dist_open, cairn_dist_restore, cairn_dist_begin, cairn_dist_commit, cairn_dist_version
  public :: cairn_dist_region_data, cairn_dist_dual_read, cairn_dist_dual_write

  ! Redundancy levels (cairn_dist_create's redundancy): what survives the loss of a rank's storage.
  integer, parameter, public :: CAIRN_DIST_LOCAL = 0, CAIRN_DIST_PARTNER = 1, CAIRN_DIST_XOR = 2

  type :: cairn_dist_ctx
    type(c_ptr) :: p = c_null_ptr
  end type
  type :: cairn_dist_region
    type(c_ptr) :: p = c_null_ptr
  end type
  type :: cairn_dist_dual
    type(c_ptr) :: p = c_null_ptr
  end type

  ! struct cairn_dist_options (cairn/dist.h), field for field.
  type, bind(c) :: c_options
    type(c_ptr) :: strategy, name, dir
    integer(c_int) :: threads, flags, redundancy, ranks_per_node, xor_group
    type(c_ptr) :: pfs_dir
    integer(c_int64_t) :: pfs_every
  end type

  interface
    subroutine c_options_init(o) bind(c, name="cairn_dist_options_init")
      import :: c_options
      type(c_options), intent(out) :: o
    end subroutine
    integer(c_int) function c_create_f(comm, o, out) bind(c, name="cairn_dist_create_f")
      import :: c_int, c_ptr, c_options
      integer(c_int), value :: comm
      type(c_options), intent(in) :: o
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_delete(ctx) bind(c, name="cairn_dist_delete")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: ctx
    end function
    integer(c_int) function c_region_create(ctx, name, bytes, out) bind(c, name="cairn_dist_region_create")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: ctx
      character(kind=c_char), intent(in) :: name(*)
      integer(c_size_t), value :: bytes
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_dual_create(ctx, name, bytes, out) bind(c, name="cairn_dist_dual_create")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: ctx
      character(kind=c_char), intent(in) :: name(*)
      integer(c_size_t), value :: bytes
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_open(ctx) bind(c, name="cairn_dist_open")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
    end function
    integer(c_int) function c_begin(ctx) bind(c, name="cairn_dist_begin")
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
    end function
    integer(c_int) function c_restore(ctx, version) bind(c, name="cairn_dist_restore")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ctx
      integer(c_int64_t), intent(out) :: version
    end function
    integer(c_int) function c_commit(ctx, version) bind(c, name="cairn_dist_commit")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ctx
      integer(c_int64_t), intent(out) :: version
    end function
    integer(c_int) function c_version(ctx, version) bind(c, name="cairn_dist_version")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ctx
      integer(c_int64_t), intent(out) :: version
    end function
    type(c_ptr) function c_region_data(region) bind(c, name="cairn_dist_region_data")
      import :: c_ptr
      type(c_ptr), value :: region
    end function
    type(c_ptr) function c_dual_read(dual) bind(c, name="cairn_dist_dual_read")
      import :: c_ptr
      type(c_ptr), value :: dual
    end function
    type(c_ptr) function c_dual_write(dual) bind(c, name="cairn_dist_dual_write")
      import :: c_ptr
      type(c_ptr), value :: dual
    end function
  end interface

contains

  ! A Fortran string as a NUL-terminated C string in an array (trailing blanks dropped), for c_loc.
  subroutine to_c(s, out)
    character(*), intent(in) :: s
    character(kind=c_char), allocatable, intent(out) :: out(:)
    integer :: i, n
    n = len_trim(s)
    allocate (out(n + 1))
    do i = 1, n
      out(i) = s(i:i)
    end do
    out(n + 1) = c_null_char
  end subroutine

  ! A context on the communicator `comm` (collective). strategy (absent or "": $CAIRN_STRATEGY, else
  ! in-place), name (the job's base name, absent: "state"), dir (absent: $CAIRN_POOL_DIR, else
  ! /dev/shm/cairn), redundancy (CAIRN_DIST_LOCAL, _PARTNER, _XOR), ranks_per_node (> 0: simulated
  ! nodes), xor_group (nodes per parity group), pfs_dir and pfs_every (flush every pfs_every-th
  ! version there), flags (CAIRN_CKPT_* of module cairn), threads (per rank, 0: all).
  integer(c_int) function cairn_dist_create(ctx, comm, strategy, name, dir, redundancy, ranks_per_node, &
                                            xor_group, pfs_dir, pfs_every, flags, threads) result(rc)
    type(cairn_dist_ctx), intent(out) :: ctx
    integer, intent(in) :: comm
    character(*), intent(in), optional :: strategy, name, dir, pfs_dir
    integer, intent(in), optional :: redundancy, ranks_per_node, xor_group, flags, threads
    integer(c_int64_t), intent(in), optional :: pfs_every
    character(kind=c_char), allocatable, target :: s(:), n(:), d(:), p(:)
    type(c_options) :: o
    call c_options_init(o)
    if (present(strategy)) then
      call to_c(strategy, s)
      o%strategy = c_loc(s)
    end if
    if (present(name)) then
      call to_c(name, n)
      o%name = c_loc(n)
    end if
    if (present(dir)) then
      call to_c(dir, d)
      o%dir = c_loc(d)
    end if
    if (present(pfs_dir)) then
      call to_c(pfs_dir, p)
      o%pfs_dir = c_loc(p)
    end if
    if (present(redundancy)) o%redundancy = int(redundancy, c_int)
    if (present(ranks_per_node)) o%ranks_per_node = int(ranks_per_node, c_int)
    if (present(xor_group)) o%xor_group = int(xor_group, c_int)
    if (present(pfs_every)) o%pfs_every = pfs_every
    if (present(flags)) o%flags = int(flags, c_int)
    if (present(threads)) o%threads = int(threads, c_int)
    rc = c_create_f(int(comm, c_int), o, ctx%p)
  end function

  ! Closes the context (before MPI_Finalize); what was committed stays in storage.
  integer(c_int) function cairn_dist_delete(ctx) result(rc)
    type(cairn_dist_ctx), intent(inout) :: ctx
    rc = c_delete(ctx%p)
  end function

  ! A region updated in place (before open): cairn_dist_begin carries the newest version into the
  ! iteration's lane; take its view after begin.
  integer(c_int) function cairn_dist_region_create(ctx, name, bytes, region) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    character(*), intent(in) :: name
    integer(c_size_t), intent(in) :: bytes
    type(cairn_dist_region), intent(out) :: region
    rc = c_region_create(ctx%p, trim(name)//c_null_char, bytes, region%p)
  end function

  ! A region with two versions (before open): read is the newest global version, write the iteration's.
  integer(c_int) function cairn_dist_dual_create(ctx, name, bytes, dual) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    character(*), intent(in) :: name
    integer(c_size_t), intent(in) :: bytes
    type(cairn_dist_dual), intent(out) :: dual
    rc = c_dual_create(ctx%p, trim(name)//c_null_char, bytes, dual%p)
  end function

  ! Collective: attaches every rank's storage.
  integer(c_int) function cairn_dist_open(ctx) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    rc = c_open(ctx%p)
  end function

  ! Collective: every rank restores the same global version; CAIRN_E_NO_VERSION on every rank when none.
  integer(c_int) function cairn_dist_restore(ctx, version) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    integer(c_int64_t), intent(out), optional :: version
    integer(c_int64_t) :: v
    rc = c_restore(ctx%p, v)
    if (present(version)) version = v
  end function

  ! Starts an iteration (plain regions carried over); commit begins one itself.
  integer(c_int) function cairn_dist_begin(ctx) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    rc = c_begin(ctx%p)
  end function

  ! Collective: local commit on every rank, then agreement; version is the new global version.
  integer(c_int) function cairn_dist_commit(ctx, version) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    integer(c_int64_t), intent(out), optional :: version
    integer(c_int64_t) :: v
    rc = c_commit(ctx%p, v)
    if (present(version)) version = v
  end function

  ! The newest global version (0 before the first).
  integer(c_int) function cairn_dist_version(ctx, version) result(rc)
    type(cairn_dist_ctx), intent(in) :: ctx
    integer(c_int64_t), intent(out) :: version
    rc = c_version(ctx%p, version)
  end function

  ! The memory of a region (after begin) and the two versions of a dual region (every iteration), as
  ! c_ptr for cairn_view.
  type(c_ptr) function cairn_dist_region_data(region)
    type(cairn_dist_region), intent(in) :: region
    cairn_dist_region_data = c_region_data(region%p)
  end function
  type(c_ptr) function cairn_dist_dual_read(dual)
    type(cairn_dist_dual), intent(in) :: dual
    cairn_dist_dual_read = c_dual_read(dual%p)
  end function
  type(c_ptr) function cairn_dist_dual_write(dual)
    type(cairn_dist_dual), intent(in) :: dual
    cairn_dist_dual_write = c_dual_write(dual%p)
  end function
end module
