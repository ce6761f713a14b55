/* A correct conv2d + matmul program for `validate run --backend exec` with one switch per classic
 * mistake (argv[2], or the MUTANT environment variable), so that a test can plant each mistake and
 * check that `validate compare` names exactly it (examples/README.md, "The mutation suite", and
 * docs/evidence.md, "Mutation suite").
 *
 * Every tensor goes through one accessor, `Spec`: a layout spec as in the layout file
 * (axes in storage order, ":F" for column-major, "+flip=" axes). The program's layouts are
 * layouts.json (channels-last data NHWC, weights HWIO, C-order matrices); a mutant reads or writes
 * one tensor with another spec, or changes the arithmetic, and nothing else. Arithmetic is in
 * double, rounded once to the case dtype, like examples/fortran.
 *
 *   usage: mutant_runner DIR [MUTANT [FAMILY]]   (MUTANT "none" or absent: the correct program;
 *          FAMILY channels_last (default), torch or fortran: the layouts it declares)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail) {
  fprintf(stderr, "mutant_runner: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(2);
}

static long env_int(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) die("missing environment variable", name);
  return strtol(v, NULL, 10);
}

/* ---- storage dtypes: float32 for float32/bfloat16 cases, IEEE half for float16 ---- */
static float bits_to_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t float_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static double half_to_double(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * ldexp(1024 + m, e - 25);
}
/* Round to `digits` significant bits, ties to even, with exponent floor emin (subnormals). */
static double round_bits(double x, int digits, int emin) {
  if (x == 0 || !isfinite(x)) return x;
  int e;
  frexp(x, &e); /* x = f * 2^e, 0.5 <= |f| < 1 */
  if (e - 1 < emin) e = emin + 1;
  const double scale = ldexp(1.0, digits - e);
  return nearbyint(x * scale) / scale;
}
static double round_to(double x, const char *fmt) {
  if (!strcmp(fmt, "float32")) return (double)(float)x;
  if (!strcmp(fmt, "bfloat16")) return round_bits((double)(float)x, 8, -126);
  if (!strcmp(fmt, "float16")) return round_bits(x, 11, -14);
  if (!strcmp(fmt, "tf32")) return round_bits((double)(float)x, 11, -126);
  return x;
}
static uint16_t double_to_half(double x) {
  x = round_bits(x, 11, -14);
  if (x == 0) return signbit(x) ? 0x8000 : 0;
  const uint16_t s = x < 0 ? 0x8000 : 0;
  x = fabs(x);
  if (x >= 65520.0) return s | 0x7c00;
  int e;
  const double f = frexp(x, &e); /* x = f 2^e */
  if (e - 1 < -14) return s | (uint16_t)nearbyint(x * ldexp(1.0, 24));
  return s | (uint16_t)(((e - 1 + 15) << 10) | ((uint16_t)nearbyint(f * 2048) - 1024));
}

/* ---- layouts ---- */
typedef struct {
  int rank;
  long dim[4];    /* canonical sizes */
  long stride[4]; /* per canonical axis */
  int flip[4];
} Spec;

/* canon: canonical axis letters ("NCHW"); text: a spec such as "NHWC", "WHIO:F", "NHWC+flip=W". */
static Spec make_spec(const char *canon, const long *dim, const char *text) {
  Spec s;
  s.rank = (int)strlen(canon);
  char axes[8] = {0};
  size_t n = strcspn(text, ":+");
  memcpy(axes, text, n);
  const int fortran = strstr(text, ":F") != NULL;
  const char *fl = strstr(text, "flip=");
  for (int a = 0; a < s.rank; ++a) {
    s.dim[a] = dim[a];
    s.flip[a] = fl && strchr(fl + 5, canon[a]) != NULL;
  }
  long st = 1;
  for (int j = 0; j < s.rank; ++j) {
    const int pos = fortran ? j : s.rank - 1 - j; /* fastest first */
    const char *c = strchr(canon, axes[pos]);
    if (!c) die("bad layout spec", text);
    s.stride[c - canon] = st;
    st *= dim[c - canon];
  }
  return s;
}
static long offset(const Spec *s, const long *idx) {
  long o = 0;
  for (int a = 0; a < s->rank; ++a) o += s->stride[a] * (s->flip[a] ? s->dim[a] - 1 - idx[a] : idx[a]);
  return o;
}
static long numel(const Spec *s) {
  long n = 1;
  for (int a = 0; a < s->rank; ++a) n *= s->dim[a];
  return n;
}
static void unravel(const Spec *s, long flat, long *idx) {
  for (int a = s->rank - 1; a >= 0; --a) { idx[a] = flat % s->dim[a]; flat /= s->dim[a]; }
}

static const char *g_dir, *g_dtype;

/* Reads DIR/NAME.bin laid out as `s` into a canonical C-order double array. */
static double *read_tensor(const char *name, const Spec *s) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", g_dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  const long n = numel(s);
  const int half = !strcmp(g_dtype, "float16");
  const size_t es = half ? 2 : 4;
  unsigned char *raw = malloc((size_t)n * es);
  if (fread(raw, es, (size_t)n, f) != (size_t)n) die("short file", path);
  fclose(f);
  double *out = malloc((size_t)n * sizeof(double));
  long idx[4];
  for (long i = 0; i < n; ++i) {
    unravel(s, i, idx);
    const long o = offset(s, idx);
    if (half) {
      uint16_t h;
      memcpy(&h, raw + o * 2, 2);
      out[i] = half_to_double(h);
    } else {
      uint32_t u;
      memcpy(&u, raw + o * 4, 4);
      out[i] = bits_to_float(u);
    }
  }
  free(raw);
  return out;
}

/* Writes canonical values, rounded once to the case dtype, laid out as `s`. */
static void write_tensor(const char *name, const Spec *s, const double *v) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", g_dir, name);
  const long n = numel(s);
  const int half = !strcmp(g_dtype, "float16");
  const size_t es = half ? 2 : 4;
  unsigned char *raw = malloc((size_t)n * es);
  long idx[4];
  for (long i = 0; i < n; ++i) {
    unravel(s, i, idx);
    const long o = offset(s, idx);
    if (half) {
      const uint16_t h = double_to_half(v[i]);
      memcpy(raw + o * 2, &h, 2);
    } else {
      const uint32_t u = float_to_bits((float)round_to(v[i], g_dtype));
      memcpy(raw + o * 4, &u, 4);
    }
  }
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(raw, es, (size_t)n, f) != (size_t)n || fclose(f)) die("cannot write", path);
  free(raw);
}
static void write_loss(double loss) {
  char path[4096];
  snprintf(path, sizeof path, "%s/loss.bin", g_dir);
  const float l = (float)loss;
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(&l, 4, 1, f) != 1 || fclose(f)) die("cannot write", path);
}

static const char *g_mut = "none";
static int g_family;
static int is(const char *m) { return !strcmp(g_mut, m); }

/* The layout family the program declares (argv[3] or MUTANT_LAYOUTS): 0 channels_last (NHWC,
 * HWIO: layouts.json), 1 torch (NCHW, OIHW: layouts_torch.json), 2 fortran (CHWN:F,
 * WHIO:F+flip=HW, column-major matrices: layouts_fortran.json, the `fortran` preset). */

/* The layout the program uses for a tensor: the declared one, unless the mutant changes it. Each
 * row: mutant, tensor, then the spec actually used in each family. */
static const char *spec_for(const char *tensor) {
  static const struct { const char *mutant, *tensor, *spec[3]; } table[] = {
      {"out_hw_swap", "output", {"NWHC", "NCWH", "CWHN:F"}},
      {"out_fortran", "output", {"NHWC:F", "NCHW:F", "CHWN"}},
      {"out_channels_first", "output", {"NCHW", "NHWC", "NCHW"}},
      {"out_flip_w", "output", {"NHWC+flip=W", "NCHW+flip=W", "CHWN:F+flip=W"}},
      {"out_fortran_hw_swap", "output", {"NWHC:F", "NCWH:F", "CWHN"}},
      {"out_hw_swap_flip_h", "output", {"NWHC+flip=H", "NCWH+flip=H", "CWHN:F+flip=H"}},
      {"grad_input_hw_swap", "grad_input", {"NWHC", "NCWH", "CWHN:F"}},
      /* cuDNN's filter descriptor: C-order OIHW; flipped in CUDNN_CONVOLUTION mode. */
      {"grad_weight_filter_layout", "grad_weight", {"OIHW", "OIHW+flip=HW", "WHIO:F"}},
      {"grad_weight_flipped", "grad_weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      {"in_hw_swap", "input", {"NWHC", "NCWH", "CWHN:F"}},
      {"in_hw_swap", "grad_input", {"NWHC", "NCWH", "CWHN:F"}},
      {"in_fortran", "input", {"NHWC:F", "NCHW:F", "CHWN"}},
      {"in_fortran", "grad_input", {"NHWC:F", "NCHW:F", "CHWN"}},
      {"data_flip", "input", {"NHWC+flip=HW", "NCHW+flip=HW", "CHWN:F+flip=HW"}},
      {"data_flip", "grad_input", {"NHWC+flip=HW", "NCHW+flip=HW", "CHWN:F+flip=HW"}},
      {"data_flip", "weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      {"data_flip", "grad_weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      /* the row: weights declared one way (WHIO:F in the fortran family), read as HWIO */
      {"weight_as_whio_f", "weight", {"WHIO:F", "HWIO", "HWIO+flip=HW"}},
      {"weight_as_whio_f", "grad_weight", {"WHIO:F", "HWIO", "HWIO+flip=HW"}},
      {"weight_as_ohwi", "weight", {"OHWI", "OHWI", "OHWI+flip=HW"}},
      {"weight_as_ohwi", "grad_weight", {"OHWI", "OHWI", "OHWI+flip=HW"}},
      {"conv_not_corr", "weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      {"conv_not_corr", "grad_weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      {"mm_transpose_B", "B", {"NK", "NK", "KN"}},
      {"mm_transpose_B", "grad_B", {"NK", "NK", "KN"}},
      {"mm_transpose_A", "A", {"KM", "KM", "MK"}},
      {"mm_transpose_A", "grad_A", {"KM", "KM", "MK"}},
      {"mm_out_transposed", "mm_output", {"NM", "NM", "MN"}},
      /* two mistakes at once: one in how an input is read, one in how the output is written */
      {"in_hw_swap_out_fortran", "input", {"NWHC", "NCWH", "CWHN:F"}},
      {"in_hw_swap_out_fortran", "grad_input", {"NWHC", "NCWH", "CWHN:F"}},
      {"in_hw_swap_out_fortran", "output", {"NHWC:F", "NCHW:F", "CHWN"}},
      {"data_flip_out_hw_swap", "input", {"NHWC+flip=HW", "NCHW+flip=HW", "CHWN:F+flip=HW"}},
      {"data_flip_out_hw_swap", "grad_input", {"NHWC+flip=HW", "NCHW+flip=HW", "CHWN:F+flip=HW"}},
      {"data_flip_out_hw_swap", "weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      {"data_flip_out_hw_swap", "grad_weight", {"HWIO+flip=HW", "OIHW+flip=HW", "WHIO:F"}},
      {"data_flip_out_hw_swap", "output", {"NWHC", "NCWH", "CWHN:F"}},
      {"weight_as_ohwi_out_fortran", "weight", {"OHWI", "OHWI", "OHWI+flip=HW"}},
      {"weight_as_ohwi_out_fortran", "grad_weight", {"OHWI", "OHWI", "OHWI+flip=HW"}},
      {"weight_as_ohwi_out_fortran", "output", {"NHWC:F", "NCHW:F", "CHWN"}},
      {"mm_transpose_A_out_transposed", "A", {"KM", "KM", "MK"}},
      {"mm_transpose_A_out_transposed", "grad_A", {"KM", "KM", "MK"}},
      {"mm_transpose_A_out_transposed", "mm_output", {"NM", "NM", "MN"}},
      /* what each family declares */
      {"*", "input", {"NHWC", "NCHW", "CHWN:F"}},
      {"*", "target", {"NHWC", "NCHW", "CHWN:F"}},
      {"*", "output", {"NHWC", "NCHW", "CHWN:F"}},
      {"*", "grad_input", {"NHWC", "NCHW", "CHWN:F"}},
      {"*", "weight", {"HWIO", "OIHW", "WHIO:F+flip=HW"}},
      {"*", "grad_weight", {"HWIO", "OIHW", "WHIO:F+flip=HW"}},
      {"*", "bias", {"O", "O", "O"}},
      {"*", "grad_bias", {"O", "O", "O"}},
      {"*", "A", {"MK", "MK", "MK:F"}},
      {"*", "grad_A", {"MK", "MK", "MK:F"}},
      {"*", "B", {"KN", "KN", "KN:F"}},
      {"*", "grad_B", {"KN", "KN", "KN:F"}},
      {"*", "mm_target", {"MN", "MN", "MN:F"}},
      {"*", "mm_output", {"MN", "MN", "MN:F"}},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i)
    if ((is(table[i].mutant) || !strcmp(table[i].mutant, "*")) && !strcmp(table[i].tensor, tensor))
      return table[i].spec[g_family];
  die("no layout for tensor", tensor);
  return NULL;
}

/* Rounding of the operands before the products (TF32 math mode, or a cast). */
static const char *operand_rounding(void) {
  if (is("tf32")) return "tf32";
  if (is("bf16_inputs")) return "bfloat16";
  if (is("fp16_inputs")) return "float16";
  return NULL;
}
/* Accumulation in a narrow type: the running sum rounded to it after every add (through float32,
 * as a float add stored into a bfloat16/half variable). Products stay exact (float x float). */
static const char *accumulator(void) {
  if (is("bf16_accumulate")) return "bfloat16";
  if (is("fp16_accumulate")) return "float16";
  return NULL;
}
static double acc_add(double s, double p) {
  const char *a = accumulator();
  return a ? round_to((double)(float)(s + p), a) : s + p;
}
static void round_all(double *v, long n) {
  const char *r = operand_rounding();
  if (r)
    for (long i = 0; i < n; ++i) v[i] = round_to(v[i], r);
}

/* MSE on the output as stored (rounded to the case dtype) and dL/dy, unless a mutant changes it.
 * rows: the first axis (batch for conv2d, M for matmul). */
static double mse(double *y, const double *t, double *dy, long n, long rows) {
  double div = (double)n;
  if (is("loss_sum")) div = 1;
  if (is("loss_mean_batch")) div = (double)rows;
  double sum = 0;
  for (long i = 0; i < n; ++i) {
    const double stored = round_to(y[i], g_dtype);
    const double yl = is("loss_unrounded") ? y[i] : stored;
    sum += (yl - t[i]) * (yl - t[i]);
    dy[i] = 2 * (yl - t[i]) / div;
    y[i] = stored;
  }
  return sum / div;
}

static void conv2d(void) {
  const long N = env_int("VALIDATE_N"), C = env_int("VALIDATE_C"), H = env_int("VALIDATE_H"),
             W = env_int("VALIDATE_W"), O = env_int("VALIDATE_O"), KH = env_int("VALIDATE_KH"),
             KW = env_int("VALIDATE_KW"), SH = env_int("VALIDATE_SH"), SW = env_int("VALIDATE_SW"),
             PH = env_int("VALIDATE_PH"), PW = env_int("VALIDATE_PW"), DH = env_int("VALIDATE_DH"),
             DW = env_int("VALIDATE_DW"), G = env_int("VALIDATE_GROUPS"),
             HO = env_int("VALIDATE_HOUT"), WO = env_int("VALIDATE_WOUT"),
             BIAS = env_int("VALIDATE_BIAS");
  const long CG = C / G, OG = O / G;
  const long xd[4] = {N, C, H, W}, wd[4] = {O, CG, KH, KW}, yd[4] = {N, O, HO, WO}, bd[1] = {O};
  Spec xs = make_spec("NCHW", xd, spec_for("input")), ws = make_spec("OIHW", wd, spec_for("weight")),
       ys = make_spec("NCHW", yd, spec_for("output")), ts = make_spec("NCHW", yd, spec_for("target")),
       gxs = make_spec("NCHW", xd, spec_for("grad_input")),
       gws = make_spec("OIHW", wd, spec_for("grad_weight")), bs = make_spec("O", bd, "O");
  double *x = read_tensor("input", &xs), *w = read_tensor("weight", &ws), *t = read_tensor("target", &ts);
  double *b = BIAS ? read_tensor("bias", &bs) : calloc((size_t)O, sizeof(double));
  double bias_scale = is("bias_missing") ? 0 : is("bias_doubled") ? 2 : 1;
  round_all(x, numel(&xs));
  round_all(w, numel(&ws));
  const long ny = N * O * HO * WO;
  double *y = calloc((size_t)ny, sizeof(double)), *dy = calloc((size_t)ny, sizeof(double));
  double *gx = calloc((size_t)numel(&xs), sizeof(double)), *gw = calloc((size_t)numel(&ws), sizeof(double));
  double *gb = calloc((size_t)O, sizeof(double));
#define XI(n, c, h, ww) ((((n) * C + (c)) * H + (h)) * W + (ww))
#define WI(o, c, h, ww) ((((o) * CG + (c)) * KH + (h)) * KW + (ww))
#define YI(n, o, h, ww) ((((n) * O + (o)) * HO + (h)) * WO + (ww))
  for (long n = 0; n < N; ++n)
    for (long o = 0; o < O; ++o)
      for (long oh = 0; oh < HO; ++oh)
        for (long ow = 0; ow < WO; ++ow) {
          double s = acc_add(0, bias_scale * b[o]);
          const long c0 = (o / OG) * CG;
          for (long c = 0; c < CG; ++c)
            for (long u = 0; u < KH; ++u) {
              const long ih = oh * SH - PH + u * DH;
              if (ih < 0 || ih >= H) continue;
              for (long v = 0; v < KW; ++v) {
                const long iw = ow * SW - PW + v * DW;
                if (iw < 0 || iw >= W) continue;
                s = acc_add(s, x[XI(n, c0 + c, ih, iw)] * w[WI(o, c, u, v)]);
              }
            }
          y[YI(n, o, oh, ow)] = s;
        }
  const double loss = mse(y, t, dy, ny, N);
  for (long n = 0; n < N; ++n)
    for (long o = 0; o < O; ++o)
      for (long oh = 0; oh < HO; ++oh)
        for (long ow = 0; ow < WO; ++ow) {
          const double g = dy[YI(n, o, oh, ow)];
          gb[o] += g;
          const long c0 = (o / OG) * CG;
          for (long c = 0; c < CG; ++c)
            for (long u = 0; u < KH; ++u) {
              const long ih = oh * SH - PH + u * DH;
              if (ih < 0 || ih >= H) continue;
              for (long v = 0; v < KW; ++v) {
                const long iw = ow * SW - PW + v * DW;
                if (iw < 0 || iw >= W) continue;
                gx[XI(n, c0 + c, ih, iw)] += g * w[WI(o, c, u, v)];
                gw[WI(o, c, u, v)] += g * x[XI(n, c0 + c, ih, iw)];
              }
            }
        }
  write_tensor("output", &ys, y);
  write_loss(loss);
  if (!is("forward_only")) { /* with layouts_forward_only.json: no gradient is asked for */
    write_tensor("grad_input", &gxs, gx);
    write_tensor("grad_weight", &gws, gw);
    if (BIAS) write_tensor("grad_bias", &bs, gb);
  }
  /* freed so the sanitized CI build (LeakSanitizer) runs this program clean */
  free(x), free(w), free(t), free(b), free(y), free(dy), free(gx), free(gw), free(gb);
}

static void matmul(void) {
  const long M = env_int("VALIDATE_M"), K = env_int("VALIDATE_K"), N = env_int("VALIDATE_NCOLS");
  const long ad[2] = {M, K}, bd[2] = {K, N}, yd[2] = {M, N};
  Spec as = make_spec("MK", ad, spec_for("A")), bs = make_spec("KN", bd, spec_for("B")),
       ys = make_spec("MN", yd, spec_for("mm_output")), ts = make_spec("MN", yd, spec_for("mm_target")),
       gas = make_spec("MK", ad, spec_for("grad_A")), gbs = make_spec("KN", bd, spec_for("grad_B"));
  double *a = read_tensor("A", &as), *b = read_tensor("B", &bs), *t = read_tensor("target", &ts);
  round_all(a, M * K);
  round_all(b, K * N);
  double *y = calloc((size_t)(M * N), sizeof(double)), *dy = calloc((size_t)(M * N), sizeof(double));
  double *ga = calloc((size_t)(M * K), sizeof(double)), *gb = calloc((size_t)(K * N), sizeof(double));
  for (long m = 0; m < M; ++m)
    for (long k = 0; k < K; ++k)
      for (long n = 0; n < N; ++n) y[m * N + n] = acc_add(y[m * N + n], a[m * K + k] * b[k * N + n]);
  const double loss = mse(y, t, dy, M * N, M);
  for (long m = 0; m < M; ++m)
    for (long k = 0; k < K; ++k)
      for (long n = 0; n < N; ++n) {
        ga[m * K + k] += dy[m * N + n] * b[k * N + n];
        gb[k * N + n] += a[m * K + k] * dy[m * N + n];
      }
  write_tensor("output", &ys, y);
  write_loss(loss);
  if (!is("forward_only")) {
    write_tensor("grad_A", &gas, ga);
    write_tensor("grad_B", &gbs, gb);
  }
  free(a), free(b), free(t), free(y), free(dy), free(ga), free(gb);
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage: mutant_runner DIR [MUTANT]", NULL);
  g_dir = argv[1];
  if (argc > 2) g_mut = argv[2];
  else if (getenv("MUTANT")) g_mut = getenv("MUTANT");
  const char *family = argc > 3 ? argv[3] : getenv("MUTANT_LAYOUTS");
  if (!family || !strcmp(family, "channels_last")) g_family = 0;
  else if (!strcmp(family, "torch")) g_family = 1;
  else if (!strcmp(family, "fortran")) g_family = 2;
  else die("unknown layout family (channels_last, torch, fortran)", family);
  const char *op = getenv("VALIDATE_OP");
  g_dtype = getenv("VALIDATE_DTYPE");
  if (!op || !g_dtype) die("missing VALIDATE_OP or VALIDATE_DTYPE", NULL);
  if (!strcmp(op, "conv2d")) conv2d();
  else if (!strcmp(op, "matmul")) matmul();
  else die("unknown op", op);
  return 0;
}
