! cairn.f90 — the Fortran module `cairn` (use cairn): checkpoint contexts over the C API (cairn.h) with
! ISO_C_BINDING, whose regions are Fortran arrays of any rank pointing at the persistent memory itself.
!
!   use cairn
!   type(cairn_ckpt) :: ck
!   type(cairn_dual) :: u
!   real(c_double), pointer :: a(:,:), b(:,:)
!   call cairn_check(cairn_ckpt_create(ck, strategy="in-place", name="heat"), "create")
!   call cairn_check(cairn_ckpt_dual_create(ck, "u", 8_c_size_t * n * n, u), "dual u")
!   call cairn_check(cairn_ckpt_open(ck), "open")
!   rc = cairn_ckpt_restore(ck, version)          ! CAIRN_E_NO_VERSION: start from scratch
!   do
!     call cairn_view(cairn_ckpt_dual_read(u), a, [n, n])    ! the two versions swap at every
!     call cairn_view(cairn_ckpt_dual_write(u), b, [n, n])   ! commit: take the views again
!     ... b from a ...
!     call cairn_check(cairn_ckpt_commit(ck, version), "commit")
!   end do
!   call cairn_check(cairn_ckpt_delete(ck), "delete")
!
! Every function returns the C API's code: 0 (CAIRN_OK) or a negative CAIRN_E_*; cairn_errormsg() is
! the message of the last failure on this thread, cairn_strerror(code) names a code, and
! cairn_check(rc, what) stops the program with both when rc < 0. cairn_view(ptr, array, shape) is
! c_f_pointer for real64, real32, int64 and int32 arrays of rank 1 to 4; any other kind or rank takes
! c_f_pointer on the same c_ptr. Strings are Fortran strings (trailing blanks dropped).
module cairn
  use, intrinsic :: iso_c_binding
  implicit none
  private

  public :: c_double, c_float, c_int, c_int64_t, c_size_t, c_ptr, c_associated
  public :: cairn_ckpt, cairn_region, cairn_dual
  public :: cairn_ckpt_create, cairn_ckpt_delete, cairn_ckpt_region_create, cairn_ckpt_dual_create
  public :: cairn_ckpt_open, cairn_ckpt_restore, cairn_ckpt_begin, cairn_ckpt_commit, cairn_ckpt_committed_version
  public :: cairn_ckpt_region_data, cairn_ckpt_dual_read, cairn_ckpt_dual_write
  public :: cairn_ckpt_strategy_count, cairn_ckpt_strategy_name
  public :: cairn_view, cairn_errormsg, cairn_strerror, cairn_check

  ! Error codes (cairn.h).
  integer(c_int), parameter, public :: CAIRN_OK = 0, CAIRN_E_INVALID_ARGUMENT = -1, CAIRN_E_NOT_FOUND = -2, &
    CAIRN_E_PERMISSION_DENIED = -3, CAIRN_E_IS_DIRECTORY = -4, CAIRN_E_TOO_SMALL = -5, CAIRN_E_TRUNCATED = -6, &
    CAIRN_E_FOREIGN_FILE = -7, CAIRN_E_WRONG_VERSION = -8, CAIRN_E_CORRUPTED = -9, CAIRN_E_OUT_OF_SPACE = -10, &
    CAIRN_E_DEVICE_FULL = -11, CAIRN_E_ALREADY_EXISTS = -12, CAIRN_E_IO = -13, CAIRN_E_POISONED = -14, &
    CAIRN_E_NOT_READY = -15, CAIRN_E_LAYOUT_MISMATCH = -16, CAIRN_E_NO_VERSION = -17, CAIRN_E_UNSUPPORTED = -18, &
    CAIRN_E_BUSY = -19, CAIRN_E_NO_MEMORY = -100, CAIRN_E_INTERNAL = -101
  ! Flags of cairn_ckpt_create.
  integer(c_int), parameter, public :: CAIRN_CKPT_ASYNC_FLUSH = 1, CAIRN_CKPT_INCREMENTAL = 2, &
    CAIRN_CKPT_HDF5 = 4, CAIRN_CKPT_NO_CHECKSUMS = 8, CAIRN_CKPT_DEFAULTS = CAIRN_CKPT_ASYNC_FLUSH

  ! Opaque handles: a context, and the regions it owns (freed with it).
  type :: cairn_ckpt
    type(c_ptr) :: p = c_null_ptr
  end type
  type :: cairn_region
    type(c_ptr) :: p = c_null_ptr
  end type
  type :: cairn_dual
    type(c_ptr) :: p = c_null_ptr
  end type

  interface cairn_view
    module procedure view_r8_1, view_r8_2, view_r8_3, view_r8_4, view_r4_1, view_r4_2, view_r4_3, view_r4_4, &
      view_i8_1, view_i8_2, view_i8_3, view_i8_4, view_i4_1, view_i4_2, view_i4_3, view_i4_4
  end interface

  ! The C functions (cairn.h).
  interface
    integer(c_int) function c_ckpt_create(strategy, name, dir, threads, flags, out) bind(c, name="cairn_ckpt_create")
      import :: c_int, c_ptr, c_char
      character(kind=c_char), intent(in) :: strategy(*), name(*), dir(*)
      integer(c_int), value :: threads, flags
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_ckpt_delete(ckpt) bind(c, name="cairn_ckpt_delete")
      import :: c_int, c_ptr
      type(c_ptr), intent(inout) :: ckpt
    end function
    integer(c_int) function c_region_create(ckpt, name, bytes, out) bind(c, name="cairn_ckpt_region_create")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: ckpt
      character(kind=c_char), intent(in) :: name(*)
      integer(c_size_t), value :: bytes
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_dual_create(ckpt, name, bytes, out) bind(c, name="cairn_ckpt_dual_create")
      import :: c_int, c_ptr, c_char, c_size_t
      type(c_ptr), value :: ckpt
      character(kind=c_char), intent(in) :: name(*)
      integer(c_size_t), value :: bytes
      type(c_ptr), intent(out) :: out
    end function
    integer(c_int) function c_ckpt_open(ckpt) bind(c, name="cairn_ckpt_open")
      import :: c_int, c_ptr
      type(c_ptr), value :: ckpt
    end function
    integer(c_int) function c_ckpt_begin(ckpt) bind(c, name="cairn_ckpt_begin")
      import :: c_int, c_ptr
      type(c_ptr), value :: ckpt
    end function
    integer(c_int) function c_ckpt_restore(ckpt, version) bind(c, name="cairn_ckpt_restore")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ckpt
      integer(c_int64_t), intent(out) :: version
    end function
    integer(c_int) function c_ckpt_commit(ckpt, version) bind(c, name="cairn_ckpt_commit")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ckpt
      integer(c_int64_t), intent(out) :: version
    end function
    integer(c_int) function c_committed_version(ckpt, version, has) bind(c, name="cairn_ckpt_committed_version")
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: ckpt
      integer(c_int64_t), intent(out) :: version
      integer(c_int), intent(out) :: has
    end function
    type(c_ptr) function c_region_data(region) bind(c, name="cairn_ckpt_region_data")
      import :: c_ptr
      type(c_ptr), value :: region
    end function
    type(c_ptr) function c_dual_read(dual) bind(c, name="cairn_ckpt_dual_read")
      import :: c_ptr
      type(c_ptr), value :: dual
    end function
    type(c_ptr) function c_dual_write(dual) bind(c, name="cairn_ckpt_dual_write")
      import :: c_ptr
      type(c_ptr), value :: dual
    end function
    integer(c_size_t) function c_strategy_count() bind(c, name="cairn_ckpt_strategy_count")
      import :: c_size_t
    end function
    type(c_ptr) function c_strategy_name(index) bind(c, name="cairn_ckpt_strategy_name")
      import :: c_ptr, c_size_t
      integer(c_size_t), value :: index
    end function
    type(c_ptr) function c_errormsg() bind(c, name="cairn_errormsg")
      import :: c_ptr
    end function
    type(c_ptr) function c_strerror(code) bind(c, name="cairn_strerror")
      import :: c_ptr, c_int
      integer(c_int), value :: code
    end function
    integer(c_size_t) function c_strlen(s) bind(c, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
    end function
  end interface

contains

  ! A Fortran string as a NUL-terminated C string (trailing blanks dropped).
  pure function c_str(s) result(out)
    character(*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: out
    out = trim(s)//c_null_char
  end function

  ! A C string (NULL: "") as a Fortran string.
  function f_str(p) result(out)
    type(c_ptr), intent(in) :: p
    character(:), allocatable :: out
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      out = ""
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(n) :: out)
    do i = 1, n
      out(i:i) = chars(i)
    end do
  end function

  ! The message of the last failed call on this thread ("" if none).
  function cairn_errormsg() result(msg)
    character(:), allocatable :: msg
    msg = f_str(c_errormsg())
  end function

  ! A short description of an error code ("no_version: ...").
  function cairn_strerror(code) result(msg)
    integer(c_int), intent(in) :: code
    character(:), allocatable :: msg
    msg = f_str(c_strerror(code))
  end function

  ! Stops the program with the code's name and the library's message when rc < 0.
  subroutine cairn_check(rc, what)
    integer(c_int), intent(in) :: rc
    character(*), intent(in) :: what
    if (rc >= 0) return
    write (0, '(a)') "cairn: "//what//": "//cairn_strerror(rc)//": "//cairn_errormsg()
    error stop 2
  end subroutine

  ! A context: strategy (absent or "": $CAIRN_STRATEGY, else in-place), name of the storage (absent:
  ! "state"), dir (absent: $CAIRN_POOL_DIR, else /dev/shm/cairn), threads (0: all), flags (CAIRN_CKPT_*).
  integer(c_int) function cairn_ckpt_create(ckpt, strategy, name, dir, threads, flags) result(rc)
    type(cairn_ckpt), intent(out) :: ckpt
    character(*), intent(in), optional :: strategy, name, dir
    integer, intent(in), optional :: threads, flags
    character(:), allocatable :: s, n, d
    integer(c_int) :: t, f
    s = ""
    n = "state"
    d = ""
    t = 0
    f = CAIRN_CKPT_DEFAULTS
    if (present(strategy)) s = strategy
    if (present(name)) n = name
    if (present(dir)) d = dir
    if (present(threads)) t = int(threads, c_int)
    if (present(flags)) f = int(flags, c_int)
    rc = c_ckpt_create(c_str(s), c_str(n), c_str(d), t, f, ckpt%p)
  end function

  ! Frees the context and its regions' memory; what was committed stays in storage.
  integer(c_int) function cairn_ckpt_delete(ckpt) result(rc)
    type(cairn_ckpt), intent(inout) :: ckpt
    rc = c_ckpt_delete(ckpt%p)
  end function

  ! A region of `bytes` bytes whose memory cairn provides (before open).
  integer(c_int) function cairn_ckpt_region_create(ckpt, name, bytes, region) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    character(*), intent(in) :: name
    integer(c_size_t), intent(in) :: bytes
    type(cairn_region), intent(out) :: region
    rc = c_region_create(ckpt%p, c_str(name), bytes, region%p)
  end function

  ! A region with two versions whose roles alternate at every commit (before open).
  integer(c_int) function cairn_ckpt_dual_create(ckpt, name, bytes, dual) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    character(*), intent(in) :: name
    integer(c_size_t), intent(in) :: bytes
    type(cairn_dual), intent(out) :: dual
    rc = c_dual_create(ckpt%p, c_str(name), bytes, dual%p)
  end function

  ! Attaches storage: opens what an earlier run committed, or creates it.
  integer(c_int) function cairn_ckpt_open(ckpt) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    rc = c_ckpt_open(ckpt%p)
  end function

  ! Brings back the last committed version; CAIRN_E_NO_VERSION when nothing was committed.
  integer(c_int) function cairn_ckpt_restore(ckpt, version) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    integer(c_int64_t), intent(out), optional :: version
    integer(c_int64_t) :: v
    rc = c_ckpt_restore(ckpt%p, v)
    if (present(version)) version = v
  end function

  integer(c_int) function cairn_ckpt_begin(ckpt) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    rc = c_ckpt_begin(ckpt%p)
  end function

  ! Makes the state durable and consistent as a new version; dual regions swap their roles.
  integer(c_int) function cairn_ckpt_commit(ckpt, version) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    integer(c_int64_t), intent(out), optional :: version
    integer(c_int64_t) :: v
    rc = c_ckpt_commit(ckpt%p, v)
    if (present(version)) version = v
  end function

  ! The last committed version in storage; has_version is .false. when nothing was committed.
  integer(c_int) function cairn_ckpt_committed_version(ckpt, version, has_version) result(rc)
    type(cairn_ckpt), intent(in) :: ckpt
    integer(c_int64_t), intent(out) :: version
    logical, intent(out) :: has_version
    integer(c_int) :: has
    rc = c_committed_version(ckpt%p, version, has)
    has_version = has /= 0
  end function

  ! The memory of a region (stays put for the context's life), and of a dual region's two versions
  ! (they swap at every commit and restore: take them again after each).
  type(c_ptr) function cairn_ckpt_region_data(region)
    type(cairn_region), intent(in) :: region
    cairn_ckpt_region_data = c_region_data(region%p)
  end function
  type(c_ptr) function cairn_ckpt_dual_read(dual)
    type(cairn_dual), intent(in) :: dual
    cairn_ckpt_dual_read = c_dual_read(dual%p)
  end function
  type(c_ptr) function cairn_ckpt_dual_write(dual)
    type(cairn_dual), intent(in) :: dual
    cairn_ckpt_dual_write = c_dual_write(dual%p)
  end function

  ! The strategies, index 1 .. cairn_ckpt_strategy_count().
  integer function cairn_ckpt_strategy_count()
    cairn_ckpt_strategy_count = int(c_strategy_count())
  end function
  function cairn_ckpt_strategy_name(index) result(name)
    integer, intent(in) :: index
    character(:), allocatable :: name
    name = f_str(c_strategy_name(int(index - 1, c_size_t)))
  end function

  ! cairn_view(ptr, array, shape): array points at the memory at ptr, of that shape.
  subroutine view_r8_1(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_double), pointer, intent(out) :: a(:)
    integer, intent(in) :: shape(1)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r8_2(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_double), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: shape(2)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r8_3(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_double), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: shape(3)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r8_4(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_double), pointer, intent(out) :: a(:, :, :, :)
    integer, intent(in) :: shape(4)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r4_1(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_float), pointer, intent(out) :: a(:)
    integer, intent(in) :: shape(1)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r4_2(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_float), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: shape(2)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r4_3(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_float), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: shape(3)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_r4_4(p, a, shape)
    type(c_ptr), intent(in) :: p
    real(c_float), pointer, intent(out) :: a(:, :, :, :)
    integer, intent(in) :: shape(4)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i8_1(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), pointer, intent(out) :: a(:)
    integer, intent(in) :: shape(1)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i8_2(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: shape(2)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i8_3(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: shape(3)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i8_4(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), pointer, intent(out) :: a(:, :, :, :)
    integer, intent(in) :: shape(4)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i4_1(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int), pointer, intent(out) :: a(:)
    integer, intent(in) :: shape(1)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i4_2(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: shape(2)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i4_3(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: shape(3)
    call c_f_pointer(p, a, shape)
  end subroutine
  subroutine view_i4_4(p, a, shape)
    type(c_ptr), intent(in) :: p
    integer(c_int), pointer, intent(out) :: a(:, :, :, :)
    integer, intent(in) :: shape(4)
    call c_f_pointer(p, a, shape)
  end subroutine

end module cairn
