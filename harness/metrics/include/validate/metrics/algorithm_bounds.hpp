#pragma once
// The rounding error of a convolution computed by Winograd F(m x m, 3 x 3) or through FFTs, per
// element of the result and per unit lambda, beyond what the direct sum's bound (bounds.hpp)
// already allows. docs/compare.md, "Algorithm-aware bounds", has the derivations; both terms are
// root-sum-squares of independent roundings, as the direct bound's statistical part is.
//
// Winograd (Lavin and Gray's transforms; the error analysis of Barabasz et al.): with
// U = G g G^T, V = B^T d B per channel and tile, M = sum_c U .* V, y = A^T M A, every rounding is
// bounded by u times a partial result, and a transform's partial results stay within its |value|
// plus its root-sum-square scale Uhat = sqrt((G.*G)(g.*g)(G.*G)^T), Vhat likewise:
//   term(i,j) = u sqrt(sum_{xi,nu} a^2 ((tU + tV + 1) S2 + C (|M| + sqrt S2)^2))
//             + u sqrt(tA) (|y_ij| + sqrt(sum a^2 M^2)),
// a = A^T_{i,xi} A^T_{j,nu}, S2 = sum_c ((|U_c| + Uhat_c)(|V_c| + Vhat_c))^2 at point (xi, nu),
// tU, tV, tA the roundings of one transformed value (two matrix products, each a multiply and an
// add per non-zero of the densest row), C the channels summed.
//
// FFT (Higham, "Accuracy and Stability of Numerical Algorithms", Thm 24.2: a radix-2 FFT of L
// points errs by at most kappa u ||X||_2, kappa = log2(L) (1 + 4 sqrt 2) with twiddles accurate to
// u): only norm-wise. Per element, the inverse transform spreads the frequency-domain errors evenly
// (each output is a unit-modulus combination of all of them), so with P channel (or batch, tile)
// pairs of plane norms ||a_p||, ||b_p|| and Ls the points spread over:
//   term = u / sqrt(Ls) sqrt((3 kappa^2 + P + 2) Q2),   Q2 = sum_p ||a_p||^2 ||b_p||^2,
// L the power-of-two transform of the padded plane, or cuDNN's 32 x 32 tile for fft_tiling.
#include <cstdint>
#include <vector>

namespace validate::compare {

// A conv2d's geometry (input NCHW, weight OIHW with C / groups input channels), stride 1 and
// dilation 1: the only geometry Winograd and FFT convolutions run.
struct ConvShape {
  std::int64_t n = 1, c = 1, h = 1, w = 1, o = 1, kh = 3, kw = 3, ph = 0, pw = 0, groups = 1;
  std::int64_t hout() const { return h + 2 * ph - kh + 1; }
  std::int64_t wout() const { return w + 2 * pw - kw + 1; }
};

enum class ConvPass { forward, backward_data, backward_filter };

// The inputs the terms need, float64, canonical layouts: x [N, C, H, W], w [O, C/groups, KH, KW],
// dy [N, O, HOUT, WOUT] (dL/dy; unused by the forward pass).
struct ConvOperands {
  const std::vector<double>* x = nullptr;
  const std::vector<double>* w = nullptr;
  const std::vector<double>* dy = nullptr;
};

// Per element of the pass's result (output [N, O, HOUT, WOUT], grad_input [N, C, H, W],
// grad_weight [O, C/groups, KH, KW]), per unit lambda; empty for a kernel other than 3x3. m is 2,
// 4 or 6; Winograd's backward filter pass is F(3x3, m x m), the transpose of F(m x m, 3x3).
// threads: 0 every core; the terms do not depend on it.
std::vector<double> winograd_term(int m, ConvPass pass, const ConvShape& s, const ConvOperands& in, int threads = 0);
// tile 0: one transform of the whole padded plane (cuDNN FFT); else tiles of `tile` x `tile`
// points (FFT_TILING: 32).
std::vector<double> fft_term(int tile, ConvPass pass, const ConvShape& s, const ConvOperands& in);

// The forward's term t_out (per output element, per unit lambda) carried into a gradient through
// dL/dy = 2 (y - t) / N, N the output's elements: each dL/dy_i moves by (2/N) t_out(i), independently,
// so the gradient's element j by (2/N) sqrt(sum_i t_out(i)^2 c_ij^2), c the other operand of its
// sum (w for grad_input, x for grad_weight, 1 for grad_bias). Stride 1, dilation 1.
enum class CarriedInto { grad_input, grad_weight, grad_bias };
std::vector<double> carried_term(CarriedInto into, const ConvShape& s, const ConvOperands& in,
                                 const std::vector<double>& t_out, int threads = 0);
// The same for a conv_transpose2d computed as the backward-data pass of the conv2d `s` (cuDNN's
// way): its output lives in s's input space [N, C, H, W], with t_in its term per element, N here
// its element count; its input x_t is s's output space (in.dy = x_t, in.w the shared weight
// [O, C / groups, KH, KW]). Carried into its grad_input (s's output space: the forward
// correlation of t_in^2 with w^2), grad_weight (t_in^2 with x_t^2) and grad_bias (per channel c).
std::vector<double> carried_term_transposed(CarriedInto into, const ConvShape& s, const ConvOperands& in,
                                            const std::vector<double>& t_in, int threads = 0);

// |A^T| (m x n), |G| (n x r), |B^T| (n x n) of F(m, r) from the Toom-Cook points 0, 1, -1, 2, -2,
// 1/2, -1/2 (the first n - 1) and infinity, row-major, and the transforms' result y of one 1-D
// tile computed exactly in float64 (for tests): y = A^T ((G g) .* (B^T d)).
struct WinogradMatrices {
  int m = 2, r = 3, n = 4;
  std::vector<double> at, g, bt;  // signed, as the transforms use them
};
WinogradMatrices winograd_matrices(int m, int r = 3);

}  // namespace validate::compare
