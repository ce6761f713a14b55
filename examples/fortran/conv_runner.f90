! conv_runner.f90 -- an external program for `validate run --backend exec`.
!
! It plays the part of a user's Fortran code: it receives the tensors of one
! case in the layouts a Fortran program calling cuDNN would use (the `fortran`
! preset), computes the forward pass, the MSE loss against `target` and every
! gradient, and writes them back in the same layouts.  The harness converts the
! results to canonical PyTorch layout and `validate compare` checks them.
!
! Usage:   validate_fortran_example [DIR]      (DIR defaults to ".")
!
! Protocol (see examples/README.md):
!   VALIDATE_OP      conv2d | matmul (any other: unsupported.txt, exit 0)
!   VALIDATE_DTYPE   float32 | bfloat16 | float16
!   conv2d: VALIDATE_N C H W O KH KW SH SW PH PW DH DW GROUPS HOUT WOUT BIAS
!   matmul: VALIDATE_M K NCOLS
!   Files in DIR: raw little-endian values in the storage dtype (float32 for
!   float32 and bfloat16 cases, IEEE half for float16), column-major.
!
! Layouts (Fortran arrays, first index fastest):
!   activations  x(C,H,W,N)           "CHWN:F"
!   weights      w(KW,KH,I,O) flipped "WHIO:F+flip=HW"
!   bias         b(O)                 "O"
!   matmul       A(M,K) B(K,N) Y(M,N) "MK:F" "KN:F" "MN:F"
!
! Why the weight is flipped: cuDNN in CUDNN_CONVOLUTION mode computes a true
! convolution, i.e. it reads the filter rotated by 180 degrees.  A Fortran code
! that wants PyTorch's cross-correlation therefore stores the kernel already
! flipped, and the bytes of w(KW,KH,I,O) column-major are the bytes of a C-order
! OIHW array.  This program reads that flipped kernel and un-flips it on use,
! and it writes grad_weight in the same flipped layout -- which is exactly the
! step real codes forget.
!
! Arithmetic is in double precision; results are rounded once to the storage
! dtype (and, for bfloat16 cases, to the nearest bfloat16 value, because the
! harness promises that a bfloat16 tensor stored as float32 holds bfloat16
! values).  The loss is computed from the output as written, like the reference
! computes it from its own (rounded) output.
!
! Training mode (exec protocol 2, VALIDATE_PROTOCOL=2): one run trains the whole
! trajectory -- each step's batch from steps/<s>/ (step 0's from DIR), forward,
! loss, backward, SGD as torch.optim.SGD in float32 (module validate_sgd) -- and
! writes train_loss.bin plus step<k>_<param> / step<k>_grad_<param> at the
! checkpoint steps (VALIDATE_CHECKPOINTS).  CONV_RUNNER_BUG=update_dw_krsc plants
! the classic: the conv2d update applies dW in the KRSC filter layout to weights
! stored OIHW, so step 0 matches and step 1 does not (examples/README.md);
! CONV_RUNNER_BUG=narrow_masters keeps the conv2d masters in the case dtype;
! CONV_RUNNER_BUG=no_weight_decay ignores the case's weight decay;
! CONV_RUNNER_BUG=no_momentum trains with momentum 0 whatever the case says;
! CONV_RUNNER_BUG=no_zero_grad never zeroes the gradients between steps (each
! step's gradient is added to the previous ones, as PyTorch's .grad without
! optimizer.zero_grad()), and writes and applies those sums.
!
! Exit codes: 0 success, 2 bad environment or I/O problem (message on stderr).
! An op other than conv2d and matmul is answered with unsupported.txt and exit 0
! (the protocol's "not supported", docs/runners.md): the task is `unsupported`.

module validate_io
  use, intrinsic :: iso_fortran_env, only: real32, real64, int16, int32, int64, error_unit
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_positive_inf, ieee_quiet_nan, &
                                                 ieee_is_nan, ieee_is_finite
  implicit none
  private
  public :: fail, say_unsupported, env_str, env_int, env_int_or, env_real, env_int_list, env_is_set, itoa, read_tensor, &
            write_tensor, write_loss, write_f32, round_to_dtype, dp

  integer, parameter :: dp = real64

contains

  subroutine fail(msg)
    character(*), intent(in) :: msg
    write (error_unit, '(a)') 'validate_fortran_example: '//msg
    stop 2
  end subroutine fail

  ! "I do not do this task": the protocol's unsupported.txt (its first line says why), then exit 0.
  ! The harness records the task as unsupported rather than failed (docs/runners.md).
  subroutine say_unsupported(dir, reason)
    character(*), intent(in) :: dir, reason
    integer :: u, ios
    character(256) :: msg
    open (newunit=u, file=dir//'/unsupported.txt', form='formatted', status='replace', action='write', &
          iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(dir//'/unsupported.txt: cannot create: '//trim(msg))
    write (u, '(a)', iostat=ios, iomsg=msg) reason
    if (ios /= 0) call fail(dir//'/unsupported.txt: write failed: '//trim(msg))
    close (u, iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(dir//'/unsupported.txt: close failed: '//trim(msg))
    stop 0
  end subroutine say_unsupported

  function env_str(name) result(val)
    character(*), intent(in) :: name
    character(:), allocatable :: val
    integer :: length, stat
    call get_environment_variable(name, length=length, status=stat)
    if (stat /= 0) call fail('environment variable '//name//' is not set')
    allocate (character(length) :: val)
    call get_environment_variable(name, val, status=stat)
  end function env_str

  integer function env_int(name) result(val)
    character(*), intent(in) :: name
    character(:), allocatable :: s
    integer :: ios
    s = env_str(name)
    read (s, *, iostat=ios) val
    if (ios /= 0) call fail('environment variable '//name//'="'//s//'" is not an integer')
  end function env_int

  logical function env_is_set(name)
    character(*), intent(in) :: name
    integer :: stat
    call get_environment_variable(name, status=stat)
    env_is_set = stat == 0
  end function env_is_set

  ! An optional integer variable: `default` when it is not set.
  integer function env_int_or(name, default) result(val)
    character(*), intent(in) :: name
    integer, intent(in) :: default
    val = default
    if (env_is_set(name)) val = env_int(name)
  end function env_int_or

  real(dp) function env_real(name) result(val)
    character(*), intent(in) :: name
    character(:), allocatable :: s
    integer :: ios
    s = env_str(name)
    read (s, *, iostat=ios) val
    ! A list-directed read stops at the first blank or comma ("0.999 junk" read as 0.999) and
    ! accepts "nan" and "inf": one finite number or nothing.
    if (ios /= 0 .or. scan(trim(adjustl(s)), ' ,/') > 0 .or. .not. (abs(val) <= huge(val))) &
      call fail('environment variable '//name//'="'//s//'" is not one finite number')
  end function env_real

  ! n integers separated by blanks ("0 1 5 9").
  subroutine env_int_list(name, n, vals)
    character(*), intent(in) :: name
    integer, intent(in) :: n
    integer, intent(out) :: vals(n)
    character(:), allocatable :: s
    integer :: ios
    s = env_str(name)
    read (s, *, iostat=ios) vals
    if (ios /= 0) call fail('environment variable '//name//'="'//s//'" is not a list of '// &
                            itoa(int(n, int64))//' integers')
  end subroutine env_int_list

  ! Bytes per stored element for a logical dtype.
  integer function storage_bytes(dtype)
    character(*), intent(in) :: dtype
    select case (dtype)
    case ('float32', 'bfloat16')
      storage_bytes = 4
    case ('float16')
      storage_bytes = 2
    case default
      storage_bytes = 0
      call fail('VALIDATE_DTYPE="'//dtype//'" is not float32, bfloat16 or float16')
    end select
  end function storage_bytes

  function itoa(i) result(s)
    integer(int64), intent(in) :: i
    character(:), allocatable :: s
    character(24) :: buf
    write (buf, '(i0)') i
    s = trim(buf)
  end function itoa

  ! Read DIR/NAME.bin holding n values in the storage dtype into a double array.
  ! The size is checked first, so a file written in the wrong dtype or for the
  ! wrong shape is reported as such instead of as a short read.
  subroutine read_tensor(dir, name, dtype, n, x)
    character(*), intent(in) :: dir, name, dtype
    integer, intent(in) :: n
    real(dp), intent(out) :: x(n)
    character(:), allocatable :: path
    real(real32), allocatable :: f(:)
    integer(int16), allocatable :: h(:)
    integer(int64) :: size, want
    integer :: u, ios, i
    character(256) :: msg
    logical :: exists

    path = dir//'/'//name//'.bin'
    inquire (file=path, exist=exists, size=size)
    if (.not. exists) call fail(path//': no such file')
    want = int(n, int64)*storage_bytes(dtype)
    if (size /= want) call fail(path//': '//itoa(size)//' bytes, expected '//itoa(want)// &
                                ' ('//itoa(int(n, int64))//' '//dtype//' values)')
    open (newunit=u, file=path, access='stream', form='unformatted', status='old', &
          action='read', iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(path//': cannot open: '//trim(msg))
    if (storage_bytes(dtype) == 4) then
      allocate (f(n))
      read (u, iostat=ios, iomsg=msg) f
      x = real(f, dp)
    else
      allocate (h(n))
      read (u, iostat=ios, iomsg=msg) h
      do i = 1, n
        x(i) = half_to_double(h(i))
      end do
    end if
    if (ios /= 0) call fail(path//': read failed: '//trim(msg))
    close (u)
  end subroutine read_tensor

  ! Write n values to DIR/NAME.bin in the storage dtype, rounding once.
  subroutine write_tensor(dir, name, dtype, n, x)
    character(*), intent(in) :: dir, name, dtype
    integer, intent(in) :: n
    real(dp), intent(in) :: x(n)
    integer :: i
    if (storage_bytes(dtype) == 4) then
      call write_f32(dir//'/'//name//'.bin', real([(round_to_dtype(x(i), dtype), i=1, n)], real32))
    else
      call write_f16(dir//'/'//name//'.bin', [(double_to_half(x(i)), i=1, n)])
    end if
  end subroutine write_tensor

  ! The loss is always one float32, whatever the case dtype.
  subroutine write_loss(dir, loss)
    character(*), intent(in) :: dir
    real(dp), intent(in) :: loss
    call write_f32(dir//'/loss.bin', [real(loss, real32)])
  end subroutine write_loss

  subroutine write_f32(path, f)
    character(*), intent(in) :: path
    real(real32), intent(in) :: f(:)
    integer :: u, ios
    character(256) :: msg
    open (newunit=u, file=path, access='stream', form='unformatted', status='replace', &
          action='write', iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(path//': cannot create: '//trim(msg))
    write (u, iostat=ios, iomsg=msg) f
    if (ios /= 0) call fail(path//': write failed: '//trim(msg))
    close (u, iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(path//': close failed: '//trim(msg))
  end subroutine write_f32

  subroutine write_f16(path, h)
    character(*), intent(in) :: path
    integer(int16), intent(in) :: h(:)
    integer :: u, ios
    character(256) :: msg
    open (newunit=u, file=path, access='stream', form='unformatted', status='replace', &
          action='write', iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(path//': cannot create: '//trim(msg))
    write (u, iostat=ios, iomsg=msg) h
    if (ios /= 0) call fail(path//': write failed: '//trim(msg))
    close (u, iostat=ios, iomsg=msg)
    if (ios /= 0) call fail(path//': close failed: '//trim(msg))
  end subroutine write_f16

  ! Round x to the nearest value with `digits` significant bits (ties to even),
  ! with gradual underflow below 2**emin.  Exact: scaling by powers of two and
  ! rounding an integer-valued double lose nothing.  No overflow handling; the
  ! callers deal with their own range.
  real(dp) function round_bits(x, digits, emin) result(r)
    real(dp), intent(in) :: x
    integer, intent(in) :: digits, emin
    real(dp) :: a, q, s, fl
    if (x == 0 .or. .not. ieee_is_finite(x)) then
      r = x
      return
    end if
    a = abs(x)
    ! a = f * 2**exponent(a), f in [0.5, 1): the quantum is 2**(exponent - digits),
    ! but never finer than that of the smallest normal number.
    q = scale(1.0_dp, max(exponent(a), emin + 1) - digits)
    s = a/q
    fl = aint(s)
    if (s - fl > 0.5_dp .or. (s - fl == 0.5_dp .and. mod(fl, 2.0_dp) /= 0)) fl = fl + 1
    r = sign(fl*q, x)
  end function round_bits

  ! The value a result has once stored in the case's dtype, as a double.
  real(dp) function round_to_dtype(x, dtype) result(r)
    real(dp), intent(in) :: x
    character(*), intent(in) :: dtype
    select case (dtype)
    case ('bfloat16')
      r = round_bits(x, 8, -126)
    case ('float16')
      r = round_bits(x, 11, -14)
      if (abs(r) > 65504) r = sign(ieee_value(r, ieee_positive_inf), x)   ! overflow
    case default
      r = real(real(x, real32), dp)
    end select
  end function round_to_dtype

  ! IEEE binary16 bits -> double.  gfortran has no half-precision kind, so the
  ! conversion is done by hand from the sign / exponent / mantissa fields.
  real(dp) function half_to_double(h) result(x)
    integer(int16), intent(in) :: h
    integer(int32) :: b, e, m
    b = iand(int(h, int32), int(z'FFFF', int32))
    e = iand(ishft(b, -10), 31)
    m = iand(b, 1023)
    if (e == 0) then
      x = scale(real(m, dp), -24)                 ! zero or subnormal
    else if (e == 31) then
      x = ieee_value(x, ieee_positive_inf)
      if (m /= 0) x = ieee_value(x, ieee_quiet_nan)
    else
      x = scale(real(m + 1024, dp), e - 25)
    end if
    if (btest(b, 15)) x = -x
  end function half_to_double

  integer(int16) function double_to_half(x) result(h)
    real(dp), intent(in) :: x
    real(dp) :: r, a
    integer(int32) :: b, e
    r = round_to_dtype(x, 'float16')
    a = abs(r)
    if (ieee_is_nan(r)) then
      b = int(z'7E00', int32)
    else if (.not. ieee_is_finite(r)) then
      b = int(z'7C00', int32)
    else if (a == 0) then
      b = 0
    else if (a < scale(1.0_dp, -14)) then
      b = nint(scale(a, 24), int32)               ! subnormal: multiple of 2**-24
    else
      e = exponent(a) - 1                         ! a = 1.f * 2**e
      b = ior(ishft(e + 15, 10), nint(scale(a, 10 - e), int32) - 1024)
    end if
    if (sign(1.0_dp, r) < 0) b = ior(b, int(z'8000', int32))
    h = int(iand(b, int(z'7FFF', int32)) - iand(b, int(z'8000', int32)), int16)
  end function double_to_half

end module validate_io

module validate_ops
  use validate_io, only: dp
  implicit none
  private
  public :: conv2d_forward, conv2d_backward

contains

  ! PyTorch conv2d (cross-correlation) on Fortran-layout arrays:
  !   y(o,oy,ox,n) = b(o) + sum_{ci,kh,kw} x(c,iy,ix,n) * W[o,ci,kh,kw]
  !   iy = (oy-1)*sh - ph + kh*dh + 1,  ix = (ox-1)*sw - pw + kw*dw + 1  (kh, kw from 0)
  ! where W is the canonical (unflipped) kernel: W[o,ci,kh,kw] = wf(KW-kw, KH-kh, ci, o).
  subroutine conv2d_forward(nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout, &
                            x, wf, b, y)
    integer, intent(in) :: nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout
    real(dp), intent(in) :: x(c, h, w, nb), wf(kw, kh, c/groups, o), b(o)
    real(dp), intent(out) :: y(o, hout, wout, nb)
    integer :: n, oc, oy, ox, i, j, ci, iy, ix, cpg, opg, c0
    real(dp) :: acc
    cpg = c/groups
    opg = o/groups
    do n = 1, nb
      do ox = 1, wout
        do oy = 1, hout
          do oc = 1, o
            c0 = ((oc - 1)/opg)*cpg          ! first input channel of this group, 0-based
            acc = b(oc)
            do j = 0, kw - 1
              ix = (ox - 1)*sw - pw + j*dw + 1
              if (ix < 1 .or. ix > w) cycle  ! zero padding
              do i = 0, kh - 1
                iy = (oy - 1)*sh - ph + i*dh + 1
                if (iy < 1 .or. iy > h) cycle
                do ci = 1, cpg
                  acc = acc + x(c0 + ci, iy, ix, n)*wf(kw - j, kh - i, ci, oc)
                end do
              end do
            end do
            y(oc, oy, ox, n) = acc
          end do
        end do
      end do
    end do
  end subroutine conv2d_forward

  ! Given dy = dL/dy, accumulate dL/dx, dL/dW (stored flipped, like wf) and dL/db.
  subroutine conv2d_backward(nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout, &
                             x, wf, dy, gx, gwf, gb)
    integer, intent(in) :: nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout
    real(dp), intent(in) :: x(c, h, w, nb), wf(kw, kh, c/groups, o), dy(o, hout, wout, nb)
    real(dp), intent(out) :: gx(c, h, w, nb), gwf(kw, kh, c/groups, o), gb(o)
    integer :: n, oc, oy, ox, i, j, ci, iy, ix, cpg, opg, c0
    real(dp) :: g
    cpg = c/groups
    opg = o/groups
    gx = 0
    gwf = 0
    gb = 0
    do n = 1, nb
      do ox = 1, wout
        do oy = 1, hout
          do oc = 1, o
            g = dy(oc, oy, ox, n)
            gb(oc) = gb(oc) + g
            c0 = ((oc - 1)/opg)*cpg
            do j = 0, kw - 1
              ix = (ox - 1)*sw - pw + j*dw + 1
              if (ix < 1 .or. ix > w) cycle
              do i = 0, kh - 1
                iy = (oy - 1)*sh - ph + i*dh + 1
                if (iy < 1 .or. iy > h) cycle
                do ci = 1, cpg
                  gx(c0 + ci, iy, ix, n) = gx(c0 + ci, iy, ix, n) + g*wf(kw - j, kh - i, ci, oc)
                  ! Same flipped position as the weight it is the gradient of.
                  gwf(kw - j, kh - i, ci, oc) = gwf(kw - j, kh - i, ci, oc) + g*x(c0 + ci, iy, ix, n)
                end do
              end do
            end do
          end do
        end do
      end do
    end do
  end subroutine conv2d_backward

end module validate_ops

module validate_sgd
  ! One SGD update as torch.optim.SGD computes it, in float32 with every operation rounded
  ! (the harness's harness/train/include/validate/train/sgd.hpp states the same rule):
  !   g = grad + weight_decay * p
  !   b = g                                 (first step with momentum)
  !   b = momentum * b + (1 - dampening) * g (after it)
  !   g = g + momentum * b (Nesterov)  or  g = b
  !   p = p - lr * g
  ! Each product is stored in a real32 variable before the sum, so the compiler cannot fuse or
  ! widen them. The trap this guards against: weight decay added after the momentum, or the
  ! momentum buffer not kept between steps, agree with PyTorch at step 0 and part from it at 1.
  use, intrinsic :: iso_fortran_env, only: real32
  implicit none
  private
  public :: sgd_config, sgd_step, adam_step, optimizer_step

  ! The schedule's optimizer: SGD, or Adam (adam = .true.: beta1, beta2, eps; lr and weight_decay
  ! shared). lr_dp/beta*_dp keep the doubles the bias corrections are computed from, as LibTorch
  ! computes them on the host in double.
  type :: sgd_config
    real(real32) :: lr = 0, momentum = 0, keep = 1, weight_decay = 0
    logical :: nesterov = .false.
    logical :: adam = .false.
    real(real32) :: beta1 = 0.9, beta2 = 0.999, eps = 1e-8
    double precision :: lr_dp = 0, beta1_dp = 0.9d0, beta2_dp = 0.999d0
  end type sgd_config

contains

  ! The gradient both optimizers update with: grad + weight_decay * p (L2 decay, as PyTorch's SGD
  ! and Adam), the product rounded to float32 before the sum.
  real(real32) function decayed(cfg, grad, p) result(g)
    type(sgd_config), intent(in) :: cfg
    real(real32), intent(in) :: grad, p
    real(real32) :: prod
    g = grad
    if (cfg%weight_decay /= 0) then
      prod = cfg%weight_decay*p
      g = g + prod
    end if
  end function decayed

  ! One update of p by the configured optimizer; buf and buf2 are its state (SGD: the momentum
  ! buffer; Adam: the two moments), t the 1-based step.
  subroutine optimizer_step(cfg, n, p, grad, buf, buf2, t)
    type(sgd_config), intent(in) :: cfg
    integer, intent(in) :: n, t
    real(real32), intent(inout) :: p(n), buf(n), buf2(n)
    real(real32), intent(in) :: grad(n)
    if (cfg%adam) then
      call adam_step(cfg, n, p, grad, buf, buf2, t)
    else
      call sgd_step(cfg, n, p, grad, buf, t == 1)
    end if
  end subroutine optimizer_step

  ! One Adam update as torch.optim.Adam computes it (L2 weight decay, no AMSGrad; the harness's
  ! harness/train/include/validate/train/adam.hpp), in float32, each operation rounded:
  !   g = grad + weight_decay * p;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g
  !   p = p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  subroutine adam_step(cfg, n, p, grad, m, v, t)
    type(sgd_config), intent(in) :: cfg
    integer, intent(in) :: n, t
    real(real32), intent(inout) :: p(n), m(n), v(n)
    real(real32), intent(in) :: grad(n)
    real(real32) :: g, prod, kept, step_size, bc2_sqrt, denom, k1, k2, ratio
    integer :: i
    step_size = real(cfg%lr_dp/(1.0d0 - cfg%beta1_dp**t), real32)
    bc2_sqrt = real(sqrt(1.0d0 - cfg%beta2_dp**t), real32)
    k1 = real(1.0d0 - cfg%beta1_dp, real32)
    k2 = real(1.0d0 - cfg%beta2_dp, real32)
    do i = 1, n
      g = decayed(cfg, grad(i), p(i))
      prod = cfg%beta1*m(i)
      kept = k1*g
      m(i) = prod + kept
      prod = cfg%beta2*v(i)
      kept = k2*g
      kept = kept*g
      v(i) = prod + kept
      denom = sqrt(v(i))/bc2_sqrt
      denom = denom + cfg%eps
      ratio = m(i)/denom
      prod = step_size*ratio
      p(i) = p(i) - prod
    end do
  end subroutine adam_step

  subroutine sgd_step(cfg, n, p, grad, buf, first)
    type(sgd_config), intent(in) :: cfg
    integer, intent(in) :: n
    real(real32), intent(inout) :: p(n), buf(n)
    real(real32), intent(in) :: grad(n)
    logical, intent(in) :: first
    real(real32) :: g, prod, kept
    integer :: i
    do i = 1, n
      g = decayed(cfg, grad(i), p(i))
      if (cfg%momentum /= 0) then
        if (first) then
          buf(i) = g
        else
          prod = cfg%momentum*buf(i)
          kept = cfg%keep*g
          buf(i) = prod + kept
        end if
        if (cfg%nesterov) then
          prod = cfg%momentum*buf(i)
          g = g + prod
        else
          g = buf(i)
        end if
      end if
      prod = cfg%lr*g
      p(i) = p(i) - prod
    end do
  end subroutine sgd_step

end module validate_sgd

program conv_runner
  use, intrinsic :: iso_fortran_env, only: real32, int64
  use validate_io
  use validate_ops
  use validate_sgd
  implicit none
  ! save: static storage, as the standard gives main-program variables anyway. gfortran otherwise
  ! keeps these descriptors on main's stack, never frees them, and LeakSanitizer (the ASan build,
  ! scripts/test-sanitized.sh) reports every run of this program as a leak.
  character(:), allocatable, save :: dir, op, dtype, bug
  integer :: nargs, length, protocol
  ! conv2d geometry (read_conv_geometry)
  integer :: nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout
  logical :: has_bias
  ! protocol 2: the training schedule (read_schedule)
  integer :: steps
  type(sgd_config) :: sgd
  integer, allocatable, save :: checkpoints(:)

  nargs = command_argument_count()
  if (nargs > 1) call fail('usage: validate_fortran_example [DIR]')
  if (nargs == 1) then
    call get_command_argument(1, length=length)
    allocate (character(length) :: dir)
    call get_command_argument(1, dir)
  else
    dir = '.'
  end if

  op = env_str('VALIDATE_OP')
  dtype = env_str('VALIDATE_DTYPE')
  ! Protocol 2 (a training case): one run trains the whole trajectory.
  protocol = env_int_or('VALIDATE_PROTOCOL', 1)
  if (protocol /= 1 .and. protocol /= 2) call fail('VALIDATE_PROTOCOL='//itoa(int(protocol, int64))// &
                                                   ' is not 1 or 2')
  ! The planted bugs of the training mode (docs: examples/README.md): CONV_RUNNER_BUG=update_dw_krsc
  ! applies each conv2d update with dW in the KRSC filter layout to weights stored OIHW;
  ! CONV_RUNNER_BUG=narrow_masters keeps the conv2d masters in the case dtype (a bfloat16 or
  ! float16 case rounds them after every update: the "pure bfloat16" optimizer);
  ! CONV_RUNNER_BUG=no_weight_decay trains without the case's weight decay; no_momentum without its
  ! momentum; no_zero_grad accumulates the gradients across steps.
  bug = ''
  if (env_is_set('CONV_RUNNER_BUG')) bug = env_str('CONV_RUNNER_BUG')
  if (bug /= '' .and. bug /= 'update_dw_krsc' .and. bug /= 'narrow_masters' .and. bug /= 'no_weight_decay' &
      .and. bug /= 'no_momentum' .and. bug /= 'no_zero_grad') &
    call fail('CONV_RUNNER_BUG="'//bug//'" is not a known bug (update_dw_krsc, narrow_masters, no_weight_decay, '// &
              'no_momentum, no_zero_grad)')
  select case (op)
  case ('conv2d')
    if (protocol == 2) then
      call train_conv2d()
    else
      call run_conv2d()
    end if
  case ('matmul')
    if (protocol == 2) then
      call train_matmul()
    else
      call run_matmul()
    end if
  case default
    ! Not an error: this program does conv2d and matmul only, and says so for any other op, so
    ! the `fortran` preset (which also lays out conv_transpose2d) runs it as it is.
    call say_unsupported(dir, 'VALIDATE_OP="'//op//'": this program does conv2d and matmul only')
  end select

contains

  ! dL/dy for L = mean((y - t)**2), using y as stored (rounded) so loss and
  ! gradients describe the output this program actually reports.
  subroutine mse(n, y, t, loss, dy)
    integer, intent(in) :: n
    real(dp), intent(inout) :: y(n)
    real(dp), intent(in) :: t(n)
    real(dp), intent(out) :: loss, dy(n)
    integer :: i
    do i = 1, n
      y(i) = round_to_dtype(y(i), dtype)
    end do
    ! The reference upcasts the output to float32 for the loss; the difference
    ! is summed in double here, which is at least as accurate.
    loss = sum((y - t)**2)/n
    dy = 2*(y - t)/n
  end subroutine mse

  subroutine read_conv_geometry()
    nb = env_int('VALIDATE_N'); c = env_int('VALIDATE_C')
    h = env_int('VALIDATE_H'); w = env_int('VALIDATE_W'); o = env_int('VALIDATE_O')
    kh = env_int('VALIDATE_KH'); kw = env_int('VALIDATE_KW')
    sh = env_int('VALIDATE_SH'); sw = env_int('VALIDATE_SW')
    ph = env_int('VALIDATE_PH'); pw = env_int('VALIDATE_PW')
    dh = env_int('VALIDATE_DH'); dw = env_int('VALIDATE_DW')
    groups = env_int('VALIDATE_GROUPS')
    hout = env_int('VALIDATE_HOUT'); wout = env_int('VALIDATE_WOUT')
    has_bias = env_int('VALIDATE_BIAS') /= 0

    if (groups < 1 .or. mod(c, groups) /= 0 .or. mod(o, groups) /= 0) &
      call fail('VALIDATE_GROUPS must divide VALIDATE_C and VALIDATE_O')
    ! Cross-check the output size the harness announced with our own formula,
    ! so a disagreement about padding or dilation shows up here, not as numbers.
    if (hout /= (h + 2*ph - dh*(kh - 1) - 1)/sh + 1 .or. wout /= (w + 2*pw - dw*(kw - 1) - 1)/sw + 1) &
      call fail('VALIDATE_HOUT/VALIDATE_WOUT disagree with H, W, kernel, stride, padding, dilation')
  end subroutine read_conv_geometry

  subroutine run_conv2d()
    integer :: nx, nw, ny
    real(dp), allocatable :: x(:), wf(:), b(:), t(:), y(:), dy(:), gx(:), gwf(:), gb(:)
    real(dp) :: loss

    call read_conv_geometry()
    nx = nb*c*h*w
    nw = o*(c/groups)*kh*kw
    ny = nb*o*hout*wout
    allocate (x(nx), wf(nw), b(o), t(ny), y(ny), dy(ny), gx(nx), gwf(nw), gb(o))
    call read_tensor(dir, 'input', dtype, nx, x)
    call read_tensor(dir, 'weight', dtype, nw, wf)
    call read_tensor(dir, 'target', dtype, ny, t)
    b = 0
    if (has_bias) call read_tensor(dir, 'bias', dtype, o, b)

    ! The flat arrays are passed to explicit-shape dummies x(C,H,W,N) etc.:
    ! a column-major file read straight into memory is already that array.
    call conv2d_forward(nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout, x, wf, b, y)
    call mse(ny, y, t, loss, dy)
    call conv2d_backward(nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout, &
                         x, wf, dy, gx, gwf, gb)

    call write_tensor(dir, 'output', dtype, ny, y)
    call write_loss(dir, loss)
    call write_tensor(dir, 'grad_input', dtype, nx, gx)
    call write_tensor(dir, 'grad_weight', dtype, nw, gwf)
    if (has_bias) call write_tensor(dir, 'grad_bias', dtype, o, gb)
  end subroutine run_conv2d

  subroutine run_matmul()
    integer :: m, k, n
    real(dp), allocatable :: a(:, :), b(:, :), t(:, :), y(:, :), dy(:, :)
    real(dp) :: loss

    m = env_int('VALIDATE_M'); k = env_int('VALIDATE_K'); n = env_int('VALIDATE_NCOLS')
    allocate (a(m, k), b(k, n), t(m, n), y(m, n), dy(m, n))
    ! MK:F, KN:F and MN:F are simply Fortran's own A(M,K), B(K,N), Y(M,N).
    call read_tensor(dir, 'A', dtype, m*k, a)
    call read_tensor(dir, 'B', dtype, k*n, b)
    call read_tensor(dir, 'target', dtype, m*n, t)

    y = matmul(a, b)
    call mse(m*n, y, t, loss, dy)

    call write_tensor(dir, 'output', dtype, m*n, y)
    call write_loss(dir, loss)
    call write_tensor(dir, 'grad_A', dtype, m*k, matmul(dy, transpose(b)))
    call write_tensor(dir, 'grad_B', dtype, k*n, matmul(transpose(a), dy))
  end subroutine run_matmul

  ! ---------------------------------------------------------------- protocol 2: training
  ! The schedule from the environment (case.json "train" holds the same): steps, the SGD
  ! hyper-parameters (17 significant digits; rounded to float32 as PyTorch's float32 optimizer
  ! holds them) and the checkpoint steps whose parameters and gradients are written back.
  subroutine read_schedule()
    integer :: n
    steps = env_int('VALIDATE_STEPS')
    if (steps < 1) call fail('VALIDATE_STEPS must be >= 1')
    select case (env_str('VALIDATE_OPTIMIZER'))
    case ('sgd')
      sgd%adam = .false.
    case ('adam')
      sgd%adam = .true.
      sgd%beta1_dp = env_real('VALIDATE_BETA1')
      sgd%beta2_dp = env_real('VALIDATE_BETA2')
      sgd%beta1 = real(sgd%beta1_dp, real32)
      sgd%beta2 = real(sgd%beta2_dp, real32)
      sgd%eps = real(env_real('VALIDATE_EPS'), real32)
      if (.not. (sgd%beta1_dp >= 0 .and. sgd%beta1_dp < 1 .and. sgd%beta2_dp >= 0 .and. sgd%beta2_dp < 1)) &
        call fail('VALIDATE_BETA1 and VALIDATE_BETA2 must lie in [0, 1)')
      if (.not. (sgd%eps > 0)) call fail('VALIDATE_EPS must be > 0 in float32')
    case default
      call fail('VALIDATE_OPTIMIZER="'//env_str('VALIDATE_OPTIMIZER')//'" is not supported (sgd, adam)')
    end select
    sgd%lr_dp = env_real('VALIDATE_LR')
    sgd%lr = real(env_real('VALIDATE_LR'), real32)
    sgd%momentum = real(env_real('VALIDATE_MOMENTUM'), real32)
    sgd%keep = real(1.0_dp - env_real('VALIDATE_DAMPENING'), real32)
    sgd%weight_decay = real(env_real('VALIDATE_WEIGHT_DECAY'), real32)
    if (bug == 'no_weight_decay') sgd%weight_decay = 0   ! the planted bug: the case's decay ignored
    sgd%nesterov = env_int('VALIDATE_NESTEROV') /= 0
    if (bug == 'no_momentum') then                        ! the planted bug: plain SGD
      sgd%momentum = 0
      sgd%nesterov = .false.
    end if
    n = env_int('VALIDATE_NCHECKPOINTS')
    if (n < 1) call fail('VALIDATE_NCHECKPOINTS must be >= 1')
    allocate (checkpoints(n))
    call env_int_list('VALIDATE_CHECKPOINTS', n, checkpoints)
  end subroutine read_schedule

  ! Where step s's batch lies: the work directory for step 0, steps/<s>/ after it.
  function step_dir(s) result(d)
    integer, intent(in) :: s
    character(:), allocatable :: d
    if (s == 0) then
      d = dir
    else
      d = dir//'/steps/'//itoa(int(s, int64))
    end if
  end function step_dir

  function step_name(s, tensor) result(name)
    integer, intent(in) :: s
    character(*), intent(in) :: tensor
    character(:), allocatable :: name
    name = 'step'//itoa(int(s, int64))//'_'//tensor
  end function step_name

  ! dW as a cuDNN filter descriptor in NHWC holds it, KRSC (k = out channel, r = kh, s = kw,
  ! c = in channel; c fastest): what the planted bug applies to weights stored w(KW,KH,I,O).
  subroutine to_krsc(nkw, nkh, nci, no, g, k)
    integer, intent(in) :: nkw, nkh, nci, no
    real(real32), intent(in) :: g(nkw, nkh, nci, no)
    real(real32), intent(out) :: k(nci, nkw, nkh, no)
    integer :: i, j, ci, oc
    do oc = 1, no
      do i = 1, nkh
        do j = 1, nkw
          do ci = 1, nci
            k(ci, j, i, oc) = g(j, i, ci, oc)
          end do
        end do
      end do
    end do
  end subroutine to_krsc

  ! conv2d trained for VALIDATE_STEPS steps: each step reads its batch (input, target), runs the
  ! forward, the MSE loss and the backward at the current parameters, writes what the protocol asks
  ! at that step, then updates weight and bias with SGD in float32. The parameters live in float32
  ! between steps (as a float32 stack holds them); the arithmetic of a step is in double, rounded
  ! once, like the single-step mode. A bfloat16/float16 case trains in mixed precision, as
  ! torch.autocast does (docs/training.md): the forward sees the float32 parameters cast to the
  ! case dtype, the optimizer receives the gradients cast to it, and the parameter checkpoints are
  ! the float32 masters (float32 files whatever the case dtype).
  subroutine train_conv2d()
    integer :: nx, nw, ny, s, i
    real(dp), allocatable :: x(:), wf(:), b(:), t(:), y(:), dy(:), gx(:), gwf(:), gb(:)
    real(real32), allocatable :: w32(:), b32(:), gw32(:), gb32(:), upd(:), bufw(:), bufb(:), bufw2(:), bufb2(:), &
                                 losses(:), accw(:), accb(:)
    real(dp) :: loss

    call read_conv_geometry()
    call read_schedule()
    nx = nb*c*h*w
    nw = o*(c/groups)*kh*kw
    ny = nb*o*hout*wout
    allocate (x(nx), wf(nw), b(o), t(ny), y(ny), dy(ny), gx(nx), gwf(nw), gb(o))
    allocate (w32(nw), b32(o), gw32(nw), gb32(o), upd(nw), bufw(nw), bufb(o), bufw2(nw), bufb2(o), losses(steps))
    allocate (accw(nw), accb(o))
    accw = 0
    accb = 0
    call read_tensor(dir, 'weight', dtype, nw, wf)
    w32 = real(wf, real32)
    b32 = 0
    if (has_bias) then
      call read_tensor(dir, 'bias', dtype, o, b)
      b32 = real(b, real32)
    end if
    bufw = 0
    bufb = 0
    bufw2 = 0
    bufb2 = 0

    do s = 0, steps - 1
      call read_tensor(step_dir(s), 'input', dtype, nx, x)
      call read_tensor(step_dir(s), 'target', dtype, ny, t)
      wf = [(round_to_dtype(real(w32(i), dp), dtype), i=1, nw)]
      b = [(round_to_dtype(real(b32(i), dp), dtype), i=1, o)]
      call conv2d_forward(nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout, x, wf, b, y)
      call mse(ny, y, t, loss, dy)
      call conv2d_backward(nb, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups, hout, wout, &
                           x, wf, dy, gx, gwf, gb)
      gw32 = real([(round_to_dtype(gwf(i), dtype), i=1, nw)], real32)
      gb32 = real([(round_to_dtype(gb(i), dtype), i=1, o)], real32)
      if (bug == 'no_zero_grad') then  ! the buffers keep every earlier step's gradient
        accw = accw + gw32
        accb = accb + gb32
        gw32 = accw
        gb32 = accb
      end if
      losses(s + 1) = real(loss, real32)
      if (s == 0) then  ! step 0 is the single-step case: its results as protocol 1 writes them
        call write_tensor(dir, 'output', dtype, ny, y)
        call write_loss(dir, loss)
        call write_tensor(dir, 'grad_input', dtype, nx, gx)
        call write_tensor(dir, 'grad_weight', dtype, nw, gwf)
        if (has_bias) call write_tensor(dir, 'grad_bias', dtype, o, gb)
      end if
      if (any(checkpoints == s)) then  ! the parameters this step used, and their gradients
        call write_tensor(dir, step_name(s, 'weight'), 'float32', nw, real(w32, dp))
        call write_tensor(dir, step_name(s, 'grad_weight'), dtype, nw, real(gw32, dp))
        if (has_bias) then
          call write_tensor(dir, step_name(s, 'bias'), 'float32', o, real(b32, dp))
          call write_tensor(dir, step_name(s, 'grad_bias'), dtype, o, real(gb32, dp))
        end if
      end if
      if (bug == 'update_dw_krsc') then
        call to_krsc(kw, kh, c/groups, o, gw32, upd)   ! step 0 reported dW right; the update is not
      else
        upd = gw32
      end if
      call optimizer_step(sgd, nw, w32, upd, bufw, bufw2, s + 1)
      if (has_bias) call optimizer_step(sgd, o, b32, gb32, bufb, bufb2, s + 1)
      if (bug == 'narrow_masters') then  ! the masters themselves kept in the case dtype
        w32 = real([(round_to_dtype(real(w32(i), dp), dtype), i=1, nw)], real32)
        b32 = real([(round_to_dtype(real(b32(i), dp), dtype), i=1, o)], real32)
      end if
    end do
    call write_f32(dir//'/train_loss.bin', losses)
  end subroutine train_conv2d

  ! matmul trained the same way: A and target are each step's batch, B the parameter.
  subroutine train_matmul()
    integer :: m, k, n, s, i, j
    real(dp), allocatable :: a(:, :), b(:, :), t(:, :), y(:, :), dy(:, :), gb(:, :)
    real(real32), allocatable :: b32(:, :), gb32(:, :), bufb(:, :), bufb2(:, :), losses(:), accb(:, :)
    real(dp) :: loss

    m = env_int('VALIDATE_M'); k = env_int('VALIDATE_K'); n = env_int('VALIDATE_NCOLS')
    call read_schedule()
    allocate (a(m, k), b(k, n), t(m, n), y(m, n), dy(m, n), gb(k, n))
    allocate (b32(k, n), gb32(k, n), bufb(k, n), bufb2(k, n), losses(steps), accb(k, n))
    accb = 0
    call read_tensor(dir, 'B', dtype, k*n, b)
    b32 = real(b, real32)
    bufb = 0
    bufb2 = 0
    do s = 0, steps - 1
      call read_tensor(step_dir(s), 'A', dtype, m*k, a)
      call read_tensor(step_dir(s), 'target', dtype, m*n, t)
      do j = 1, n
        do i = 1, k
          b(i, j) = round_to_dtype(real(b32(i, j), dp), dtype)   ! mixed precision: the cast forward
        end do
      end do
      y = matmul(a, b)
      call mse(m*n, y, t, loss, dy)
      gb = matmul(transpose(a), dy)
      do j = 1, n
        do i = 1, k
          gb32(i, j) = real(round_to_dtype(gb(i, j), dtype), real32)
        end do
      end do
      if (bug == 'no_zero_grad') then
        accb = accb + gb32
        gb32 = accb
      end if
      losses(s + 1) = real(loss, real32)
      if (s == 0) then
        call write_tensor(dir, 'output', dtype, m*n, y)
        call write_loss(dir, loss)
        call write_tensor(dir, 'grad_A', dtype, m*k, matmul(dy, transpose(b)))
        call write_tensor(dir, 'grad_B', dtype, k*n, gb)
      end if
      if (any(checkpoints == s)) then
        call write_tensor(dir, step_name(s, 'B'), 'float32', k*n, real(b32, dp))
        call write_tensor(dir, step_name(s, 'grad_B'), dtype, k*n, real(gb32, dp))
      end if
      call optimizer_step(sgd, k*n, b32, gb32, bufb, bufb2, s + 1)
    end do
    call write_f32(dir//'/train_loss.bin', losses)
  end subroutine train_matmul

end program conv_runner
