/* A correct stack for `validate run --backend exec`, written in C from docs/runners.md only.
 *
 * conv2d and matmul straight from their definitions in float32, MSE loss on the stored output and
 * every gradient, NCHW data, OIHW weights, matmul's B as [K, N] (layouts_c.json), .bin files.
 * Every output or gradient element is a sum of float32 products; the products are gathered into a
 * buffer in the definition's order and summed by one of four strategies:
 *
 *   naive     in order, one float32 accumulator
 *   reversed  in reverse order
 *   pairwise  recursive halving (the error grows with log2 of the length, not the length)
 *   blocked   16 float32 partial sums (term i into lane i mod 16, as a 16-wide SIMD loop does),
 *             the lanes then added in order
 *
 * dL/dy = 2 (y - t) / numel is kept in float32 (not rounded to the case dtype). Results are
 * rounded once, with ties to even, to the case dtype by round_to() below (float16 results are
 * then stored as IEEE half, bfloat16 ones as float32).
 *
 * Usage: panel_c DIR naive|reversed|pairwise|blocked
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum order { NAIVE, REVERSED, PAIRWISE, BLOCKED };
static enum order g_order;
static const char *g_dir;
static int g_half; /* float16 storage */

static void die(const char *what, const char *detail) {
  fprintf(stderr, "panel_c: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(2);
}

static long env_long(const char *name) {
  const char *v = getenv(name);
  char *end;
  long x;
  if (!v || !*v) die("environment variable missing", name);
  errno = 0;
  x = strtol(v, &end, 10);
  if (errno || *end || x < 0) die("environment variable is not a non-negative integer", name);
  return x;
}

/* Rounds x to p significant bits (ties to even) with emin the smallest normal exponent: the
 * quantum of x's binade, never below the subnormal grid's. x / quantum is exact; rint rounds half
 * to even in the default rounding mode. */
static double round_bits(double x, int p, int emin) {
  int e;
  double q;
  if (x == 0 || !isfinite(x)) return x;
  (void)frexp(x, &e);
  e = e - 1 < emin ? emin : e - 1;
  q = ldexp(1.0, e - (p - 1));
  return rint(x / q) * q;
}

static int g_p, g_emin; /* the case dtype's significand bits and smallest normal exponent */
static double round_to(double x) { return round_bits(x, g_p, g_emin); }

static float half_to_float(unsigned short h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
  v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
  return (float)(s ? -v : v);
}

/* x must be a float16 value already (round_to did the rounding). */
static unsigned short float_to_half(double x) {
  unsigned short s = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  int e;
  if (isnan(x)) return 0x7e00;
  if (a == 0) return s;
  if (a > 65504) return s | 0x7c00;
  (void)frexp(a, &e);
  if (e - 1 < -14) return s | (unsigned short)(a * 16777216.0); /* subnormal: units of 2^-24 */
  return s | (unsigned short)((e - 1 + 15) << 10) | (unsigned short)(ldexp(a, 11 - e) - 1024);
}

static char *path_of(const char *name) {
  static char buf[4096];
  if (snprintf(buf, sizeof buf, "%s/%s.bin", g_dir, name) >= (int)sizeof buf) die("path too long", name);
  return buf;
}

static float *xalloc(size_t n) {
  float *p = calloc(n ? n : 1, sizeof(float));
  if (!p) die("out of memory", NULL);
  return p;
}

static float *read_tensor(const char *name, size_t n) {
  FILE *f = fopen(path_of(name), "rb");
  size_t width = g_half ? 2 : 4, i;
  unsigned char *raw;
  float *out = xalloc(n);
  if (!f) die("cannot open", path_of(name));
  raw = malloc(n * width + 1);
  if (!raw) die("out of memory", NULL);
  if (fread(raw, width, n, f) != n || fgetc(f) != EOF) die("wrong size", path_of(name));
  fclose(f);
  for (i = 0; i < n; ++i) {
    if (g_half) {
      unsigned short h = (unsigned short)(raw[2 * i] | raw[2 * i + 1] << 8);
      out[i] = half_to_float(h);
    } else {
      memcpy(&out[i], raw + 4 * i, 4); /* little-endian host, as the protocol's files */
    }
  }
  free(raw);
  return out;
}

/* Rounds once to the case dtype and writes the storage dtype. */
static void write_tensor(const char *name, const float *v, size_t n) {
  FILE *f = fopen(path_of(name), "wb");
  size_t i;
  if (!f) die("cannot create", path_of(name));
  for (i = 0; i < n; ++i) {
    double r = round_to(v[i]);
    if (g_half) {
      unsigned short h = float_to_half(r);
      unsigned char b[2] = {(unsigned char)(h & 255), (unsigned char)(h >> 8)};
      fwrite(b, 1, 2, f);
    } else {
      float x = (float)r; /* exact */
      fwrite(&x, 4, 1, f);
    }
  }
  if (fclose(f)) die("cannot write", path_of(name));
}

static float sum_pairwise(const float *t, size_t n) {
  if (n == 0) return 0.0f;
  if (n == 1) return t[0];
  return sum_pairwise(t, n / 2) + sum_pairwise(t + n / 2, n - n / 2);
}

/* The float32 sum of t[0..n) in the chosen order. */
static float reduce(const float *t, size_t n) {
  float s = 0.0f, lane[16];
  size_t i;
  switch (g_order) {
  case NAIVE:
    for (i = 0; i < n; ++i) s += t[i];
    return s;
  case REVERSED:
    for (i = n; i-- > 0;) s += t[i];
    return s;
  case PAIRWISE:
    return sum_pairwise(t, n);
  case BLOCKED:
    memset(lane, 0, sizeof lane);
    for (i = 0; i < n; ++i) lane[i % 16] += t[i];
    for (i = 0; i < 16; ++i) s += lane[i];
    return s;
  }
  return s;
}

/* Loss on the output as stored, and dL/dy in float32 (overwrites y with its stored values). */
static float loss_and_dy(float *y, const float *t, float *dy, size_t n, float *terms) {
  size_t i;
  for (i = 0; i < n; ++i) {
    float d;
    y[i] = (float)round_to(y[i]);
    d = y[i] - t[i];
    terms[i] = d * d;
    dy[i] = 2.0f * d / (float)n;
  }
  return reduce(terms, n) / (float)n;
}

static void write_loss(float loss) {
  FILE *f = fopen(path_of("loss"), "wb");
  if (!f || fwrite(&loss, 4, 1, f) != 1 || fclose(f)) die("cannot write", path_of("loss"));
}

static void conv2d(void) {
  long N = env_long("VALIDATE_N"), C = env_long("VALIDATE_C"), H = env_long("VALIDATE_H"),
       W = env_long("VALIDATE_W"), O = env_long("VALIDATE_O"), KH = env_long("VALIDATE_KH"),
       KW = env_long("VALIDATE_KW"), SH = env_long("VALIDATE_SH"), SW = env_long("VALIDATE_SW"),
       PH = env_long("VALIDATE_PH"), PW = env_long("VALIDATE_PW"), DH = env_long("VALIDATE_DH"),
       DW = env_long("VALIDATE_DW"), G = env_long("VALIDATE_GROUPS"), HO = env_long("VALIDATE_HOUT"),
       WO = env_long("VALIDATE_WOUT"), BIAS = env_long("VALIDATE_BIAS");
  long Cg, Og, n, o, c, kh, kw, oy, ox, h, w;
  size_t nx, nw, ny, P, maxterms, k;
  float *x, *wt, *b = NULL, *t, *y, *dy, *gx, *gw, *gb = NULL, *terms, *patch, *wc;
  char *inside;
  if (G == 0 || C % G || O % G) die("GROUPS must divide C and O", NULL);
  Cg = C / G, Og = O / G;
  nx = (size_t)(N * C * H * W), nw = (size_t)(O * Cg * KH * KW), ny = (size_t)(N * O * HO * WO);
  P = (size_t)(N * HO * WO);
  x = read_tensor("input", nx), wt = read_tensor("weight", nw), t = read_tensor("target", ny);
  if (BIAS) b = read_tensor("bias", (size_t)O);
  y = xalloc(ny), dy = xalloc(ny), gx = xalloc(nx), gw = xalloc(nw);
  maxterms = (size_t)(Cg * KH * KW + 1);
  if ((size_t)(Og * KH * KW) > maxterms) maxterms = (size_t)(Og * KH * KW);
  if (P > maxterms) maxterms = P;
  if (ny > maxterms) maxterms = ny;
  terms = xalloc(maxterms);
  /* forward: for each output position its input patch over (c in group, kh, kw), then one sum
   * per output channel: bias first, then the products in (c, kh, kw) order; padding skipped */
  patch = xalloc((size_t)(Cg * KH * KW));
  inside = malloc((size_t)(Cg * KH * KW));
  if (!inside) die("out of memory", NULL);
  for (n = 0; n < N; ++n)
    for (oy = 0; oy < HO; ++oy)
      for (ox = 0; ox < WO; ++ox)
        for (long gi = 0; gi < G; ++gi) {
          for (c = 0; c < Cg; ++c)
            for (kh = 0; kh < KH; ++kh)
              for (kw = 0; kw < KW; ++kw) {
                long iy = oy * SH - PH + kh * DH, ix = ox * SW - PW + kw * DW;
                size_t j = (size_t)((c * KH + kh) * KW + kw);
                inside[j] = iy >= 0 && iy < H && ix >= 0 && ix < W;
                patch[j] = inside[j] ? x[((n * C + gi * Cg + c) * H + iy) * W + ix] : 0.0f;
              }
          for (o = gi * Og; o < (gi + 1) * Og; ++o) {
            const float *wo = wt + (size_t)(o * Cg * KH * KW);
            size_t m = 0;
            if (BIAS) terms[m++] = b[o];
            for (k = 0; k < (size_t)(Cg * KH * KW); ++k)
              if (inside[k]) terms[m++] = patch[k] * wo[k];
            y[((n * O + o) * HO + oy) * WO + ox] = reduce(terms, m);
          }
        }
  free(inside);
  write_loss(loss_and_dy(y, t, dy, ny, terms));
  write_tensor("output", y, ny);
  /* grad_input[n, c, h, w]: sum over (o in c's group, kh, kw) of dy[n, o, oy, ox] w[o, c, kh, kw]
   * where h = oy SH - PH + kh DH (and likewise for w); the weight staged channel-major */
  wc = xalloc(nw);
  for (o = 0; o < O; ++o)
    for (c = 0; c < Cg; ++c)
      for (k = 0; k < (size_t)(KH * KW); ++k)
        wc[((size_t)c * O + (size_t)o) * (size_t)(KH * KW) + k] = wt[((size_t)o * Cg + (size_t)c) * (size_t)(KH * KW) + k];
  for (n = 0; n < N; ++n)
    for (c = 0; c < C; ++c) {
      long gi = c / Cg, cl = c % Cg;
      for (h = 0; h < H; ++h)
        for (w = 0; w < W; ++w) {
          size_t m = 0;
          for (o = gi * Og; o < (gi + 1) * Og; ++o)
            for (kh = 0; kh < KH; ++kh) {
              long ty = h + PH - kh * DH;
              if (ty < 0 || ty % SH || ty / SH >= HO) continue;
              for (kw = 0; kw < KW; ++kw) {
                long tx = w + PW - kw * DW;
                if (tx < 0 || tx % SW || tx / SW >= WO) continue;
                terms[m++] = dy[((n * O + o) * HO + ty / SH) * WO + tx / SW] *
                             wc[((size_t)cl * O + (size_t)o) * (size_t)(KH * KW) + (size_t)(kh * KW + kw)];
              }
            }
          gx[((n * C + c) * H + h) * W + w] = reduce(terms, m);
        }
    }
  write_tensor("grad_input", gx, nx);
  /* grad_weight[o, c, kh, kw]: sum over (n, oy, ox) of x[n, c, iy, ix] dy[n, o, oy, ox]; the
   * shifted input gathered once per (c, kh, kw), padding skipped */
  free(patch);
  patch = xalloc(P);
  {
    inside = malloc(P ? P : 1);
    if (!inside) die("out of memory", NULL);
    for (c = 0; c < C; ++c) {
      long gi = c / Cg, cl = c % Cg;
      for (kh = 0; kh < KH; ++kh)
        for (kw = 0; kw < KW; ++kw) {
          size_t p = 0;
          for (n = 0; n < N; ++n)
            for (oy = 0; oy < HO; ++oy)
              for (ox = 0; ox < WO; ++ox, ++p) {
                long iy = oy * SH - PH + kh * DH, ix = ox * SW - PW + kw * DW;
                inside[p] = iy >= 0 && iy < H && ix >= 0 && ix < W;
                patch[p] = inside[p] ? x[((n * C + c) * H + iy) * W + ix] : 0.0f;
              }
          for (o = gi * Og; o < (gi + 1) * Og; ++o) {
            size_t m = 0;
            p = 0;
            for (n = 0; n < N; ++n) {
              const float *d = dy + (size_t)((n * O + o) * HO * WO);
              for (k = 0; k < (size_t)(HO * WO); ++k, ++p)
                if (inside[p]) terms[m++] = patch[p] * d[k];
            }
            gw[((o * Cg + cl) * KH + kh) * KW + kw] = reduce(terms, m);
          }
        }
    }
    free(inside);
  }
  write_tensor("grad_weight", gw, nw);
  if (BIAS) {
    gb = xalloc((size_t)O);
    for (o = 0; o < O; ++o) {
      size_t m = 0;
      for (n = 0; n < N; ++n)
        for (k = 0; k < (size_t)(HO * WO); ++k) terms[m++] = dy[(size_t)((n * O + o) * HO * WO) + k];
      gb[o] = reduce(terms, m);
    }
    write_tensor("grad_bias", gb, (size_t)O);
  }
}

static void matmul(void) {
  size_t M = (size_t)env_long("VALIDATE_M"), K = (size_t)env_long("VALIDATE_K"),
         NC = (size_t)env_long("VALIDATE_NCOLS"), i, j, k, maxterms;
  float *a = read_tensor("A", M * K), *b = read_tensor("B", K * NC), *t = read_tensor("target", M * NC);
  float *bt = xalloc(K * NC), *at = xalloc(K * M), *y = xalloc(M * NC), *dy = xalloc(M * NC),
        *dyt = xalloc(M * NC), *ga = xalloc(M * K), *gb = xalloc(K * NC), *terms;
  maxterms = K > M ? K : M;
  if (NC > maxterms) maxterms = NC;
  if (M * NC > maxterms) maxterms = M * NC;
  terms = xalloc(maxterms);
  /* transposed copies so that every sum reads contiguous memory (copies change no value) */
  for (k = 0; k < K; ++k)
    for (j = 0; j < NC; ++j) bt[j * K + k] = b[k * NC + j];
  for (i = 0; i < M; ++i)
    for (k = 0; k < K; ++k) at[k * M + i] = a[i * K + k];
  for (i = 0; i < M; ++i)
    for (j = 0; j < NC; ++j) {
      for (k = 0; k < K; ++k) terms[k] = a[i * K + k] * bt[j * K + k];
      y[i * NC + j] = reduce(terms, K);
    }
  write_loss(loss_and_dy(y, t, dy, M * NC, terms));
  write_tensor("output", y, M * NC);
  for (i = 0; i < M; ++i) /* grad_A[i, k] = sum_j dy[i, j] B[k, j] */
    for (k = 0; k < K; ++k) {
      for (j = 0; j < NC; ++j) terms[j] = dy[i * NC + j] * b[k * NC + j];
      ga[i * K + k] = reduce(terms, NC);
    }
  write_tensor("grad_A", ga, M * K);
  for (i = 0; i < M; ++i)
    for (j = 0; j < NC; ++j) dyt[j * M + i] = dy[i * NC + j];
  for (k = 0; k < K; ++k) /* grad_B[k, j] = sum_i A[i, k] dy[i, j] */
    for (j = 0; j < NC; ++j) {
      for (i = 0; i < M; ++i) terms[i] = at[k * M + i] * dyt[j * M + i];
      gb[k * NC + j] = reduce(terms, M);
    }
  write_tensor("grad_B", gb, K * NC);
}

int main(int argc, char **argv) {
  const char *dtype = getenv("VALIDATE_DTYPE"), *op = getenv("VALIDATE_OP"), *protocol = getenv("VALIDATE_PROTOCOL");
  if (argc != 3) die("usage: panel_c DIR naive|reversed|pairwise|blocked", NULL);
  g_dir = argv[1];
  if (!strcmp(argv[2], "naive")) g_order = NAIVE;
  else if (!strcmp(argv[2], "reversed")) g_order = REVERSED;
  else if (!strcmp(argv[2], "pairwise")) g_order = PAIRWISE;
  else if (!strcmp(argv[2], "blocked")) g_order = BLOCKED;
  else die("unknown summation order (naive, reversed, pairwise, blocked)", argv[2]);
  if (protocol && strcmp(protocol, "1")) die("training cases (protocol 2) are not part of the panel", NULL);
  if (!dtype) die("VALIDATE_DTYPE is not set", NULL);
  if (!strcmp(dtype, "float32")) g_p = 24, g_emin = -126;
  else if (!strcmp(dtype, "bfloat16")) g_p = 8, g_emin = -126;
  else if (!strcmp(dtype, "float16")) g_p = 11, g_emin = -14, g_half = 1;
  else die("VALIDATE_DTYPE is not float32, bfloat16 or float16", dtype);
  if (op && !strcmp(op, "conv2d")) conv2d();
  else if (op && !strcmp(op, "matmul")) matmul();
  else die("VALIDATE_OP is not conv2d or matmul", op);
  return 0;
}
