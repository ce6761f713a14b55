/* matmul_runner.c -- a C program for `validate run --backend exec` with switchable layout bugs.
 *
 * It computes matmul Y = A B, the MSE loss against `target` and dL/dA, dL/dB correctly -- unless
 * asked to make one of the classic layout mistakes, so that `validate compare` can be seen to
 * name it:
 *
 *   validate_c_buggy_example DIR [BUG]      (BUG may also come from the environment variable BUG)
 *
 *   none            correct (the default)
 *   transpose_B     reads B as if it were stored [N,K] -- PyTorch's Linear weight is [out,in],
 *                   the math wants [in,out] -- and writes grad_B the same way.  compare says
 *                   "B read in NK layout (a Linear weight's [out,in]) instead of KN".
 *   fortran_order   writes the output column-major (as if for a Fortran / BLAS caller) while
 *                   layouts.json declares C order "MN".  compare says "the output written
 *                   transposed".
 *
 * Layouts (layouts.json): C order, the natural one for C -- A "MK", B "KN", target/output "MN",
 * grad_A "MK", grad_B "KN".  conv2d is not in the layout file, so the harness never asks for it.
 * The VALIDATE_* protocol is described in examples/README.md.
 *
 * Storage: float32 for float32 and bfloat16 cases (results are rounded to bfloat16 values for the
 * latter), IEEE half for float16.  Sums are in double.  Exit 2 on any bad input, with a message.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* g_dir = ".";
static const char* g_dtype = "float32";

static void fail(const char* fmt, const char* a, const char* b) {
  fprintf(stderr, "validate_c_buggy_example: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  exit(2);
}

static long env_long(const char* name) {
  const char* s = getenv(name);
  if (!s) fail("environment variable %s is not set%s", name, "");
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v <= 0) fail("environment variable %s=\"%s\" is not a positive integer", name, s);
  return v;
}

static int half_storage(void) { return strcmp(g_dtype, "float16") == 0; }

/* ---- storage dtype conversions (no half type in C99, so bit manipulation) ---- */

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* Round |x| to `digits` significant bits, ties to even, never finer than the quantum at 2**emin. */
static double round_bits(double x, int digits, int emin) {
  if (x == 0 || !isfinite(x)) return x;
  int e;
  frexp(x, &e); /* |x| = f 2**e, f in [0.5, 1) */
  double q = ldexp(1.0, (e > emin + 1 ? e : emin + 1) - digits);
  return nearbyint(x / q) * q; /* default rounding mode: to nearest, ties to even */
}

static uint16_t double_to_half(double x) {
  double r = round_bits(x, 11, -14);
  uint16_t sign = signbit(r) ? 0x8000 : 0;
  double a = fabs(r);
  if (isnan(r)) return 0x7E00;
  if (a > 65504) return sign | 0x7C00;
  if (a < ldexp(1.0, -14)) return sign | (uint16_t)ldexp(a, 24); /* zero or subnormal */
  int e;
  frexp(a, &e);
  return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(ldexp(a, 11 - e) - 1024);
}

static double round_to_dtype(double x) {
  if (strcmp(g_dtype, "bfloat16") == 0) return round_bits(x, 8, -126);
  if (half_storage()) return half_to_double(double_to_half(x));
  return (float)x;
}

/* ---- files ---- */

static double* read_tensor(const char* name, long n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", g_dir, name);
  FILE* f = fopen(path, "rb");
  if (!f) fail("%s: cannot open: %s", path, strerror(errno));
  size_t width = half_storage() ? 2 : 4;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (size != n * (long)width) {
    char want[64];
    snprintf(want, sizeof want, "%ld bytes (%ld values)", n * (long)width, n);
    fail("%s: wrong size, expected %s", path, want);
  }
  unsigned char* raw = malloc((size_t)size);
  double* x = malloc(sizeof(double) * (size_t)n);
  if (!raw || !x) fail("%s: out of memory%s", path, "");
  if (fread(raw, 1, (size_t)size, f) != (size_t)size) fail("%s: short read%s", path, "");
  fclose(f);
  for (long i = 0; i < n; ++i) { /* little-endian storage on a little-endian host */
    if (half_storage()) {
      uint16_t h;
      memcpy(&h, raw + 2 * i, 2);
      x[i] = half_to_double(h);
    } else {
      float v;
      memcpy(&v, raw + 4 * i, 4);
      x[i] = v;
    }
  }
  free(raw);
  return x;
}

static void write_raw(const char* name, const void* data, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", g_dir, name);
  FILE* f = fopen(path, "wb");
  if (!f) fail("%s: cannot create: %s", path, strerror(errno));
  if (fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) fail("%s: write failed: %s", path, strerror(errno));
}

static void write_tensor(const char* name, const double* x, long n) {
  if (half_storage()) {
    uint16_t* h = malloc(2 * (size_t)n);
    for (long i = 0; i < n; ++i) h[i] = double_to_half(x[i]);
    write_raw(name, h, 2 * (size_t)n);
    free(h);
  } else {
    float* f = malloc(4 * (size_t)n);
    for (long i = 0; i < n; ++i) f[i] = (float)round_to_dtype(x[i]);
    write_raw(name, f, 4 * (size_t)n);
    free(f);
  }
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: validate_c_buggy_example DIR [none|transpose_B|fortran_order]\n");
    return 2;
  }
  g_dir = argv[1];
  const char* bug = argc == 3 ? argv[2] : getenv("BUG");
  if (!bug || !*bug) bug = "none";
  const int transpose_b = strcmp(bug, "transpose_B") == 0;
  const int fortran_order = strcmp(bug, "fortran_order") == 0;
  if (!transpose_b && !fortran_order && strcmp(bug, "none") != 0)
    fail("unknown BUG \"%s\"%s (none, transpose_B, fortran_order)", bug, "");

  const char* op = getenv("VALIDATE_OP");
  if (!op || strcmp(op, "matmul") != 0) fail("VALIDATE_OP=\"%s\": this program only does matmul%s", op ? op : "", "");
  g_dtype = getenv("VALIDATE_DTYPE") ? getenv("VALIDATE_DTYPE") : "";
  if (strcmp(g_dtype, "float32") && strcmp(g_dtype, "bfloat16") && strcmp(g_dtype, "float16"))
    fail("VALIDATE_DTYPE=\"%s\" is not float32, bfloat16 or float16%s", g_dtype, "");
  const long M = env_long("VALIDATE_M"), K = env_long("VALIDATE_K"), N = env_long("VALIDATE_NCOLS");

  double* A = read_tensor("A", M * K);
  double* B = read_tensor("B", K * N);
  double* T = read_tensor("target", M * N);
  double *Y = calloc((size_t)(M * N), sizeof(double)), *dY = calloc((size_t)(M * N), sizeof(double));
  double *gA = calloc((size_t)(M * K), sizeof(double)), *gB = calloc((size_t)(K * N), sizeof(double));
  if (!Y || !dY || !gA || !gB) fail("out of memory%s%s", "", "");

  /* Where B[k][n] lives.  Correct: row-major [K,N].  The bug: row-major [N,K]. */
#define BIDX(k, n) (transpose_b ? (n) * K + (k) : (k) * N + (n))

  for (long m = 0; m < M; ++m)
    for (long n = 0; n < N; ++n) {
      double s = 0;
      for (long k = 0; k < K; ++k) s += A[m * K + k] * B[BIDX(k, n)];
      Y[m * N + n] = round_to_dtype(s); /* the loss is of the output as stored */
    }
  double loss = 0;
  for (long i = 0; i < M * N; ++i) {
    loss += (Y[i] - T[i]) * (Y[i] - T[i]);
    dY[i] = 2 * (Y[i] - T[i]) / (double)(M * N);
  }
  loss /= (double)(M * N);
  for (long m = 0; m < M; ++m)
    for (long k = 0; k < K; ++k)
      for (long n = 0; n < N; ++n) {
        gA[m * K + k] += dY[m * N + n] * B[BIDX(k, n)]; /* dY B^T */
        gB[BIDX(k, n)] += A[m * K + k] * dY[m * N + n]; /* A^T dY, in the program's idea of B's layout */
      }

  if (fortran_order) { /* the bug: column-major output under a C-order declaration */
    double* yt = malloc(sizeof(double) * (size_t)(M * N));
    for (long m = 0; m < M; ++m)
      for (long n = 0; n < N; ++n) yt[n * M + m] = Y[m * N + n];
    write_tensor("output", yt, M * N);
    free(yt);
  } else {
    write_tensor("output", Y, M * N);
  }
  float l = (float)loss;
  write_raw("loss", &l, sizeof l);
  write_tensor("grad_A", gA, M * K);
  write_tensor("grad_B", gB, K * N);
  free(A), free(B), free(T), free(Y), free(dY), free(gA), free(gB);
  return 0;
}
