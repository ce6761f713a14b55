// Compiled into `validate` only under VALIDATE_SANITIZE (scripts/test-sanitized.sh).
//
// LeakSanitizer of GCC 12's runtime crashes at exit ("Tracer caught signal 11", then "LeakSanitizer
// has encountered a fatal error") while scanning the dynamic TLS of a thread created by a library
// that was dlopen()ed: here libgomp's OpenMP workers, which LibTorch starts from
// libvalidate_torch.so (`generate` with OMP_NUM_THREADS=2 reproduces it every time). The runtime
// reads a garbage DTLS range from glibc's thread vector. Without intercepting __tls_get_addr it
// does not track dynamic TLS at all, and the leak check runs normally. ASAN_OPTIONS from the
// environment still override this default.
extern "C" const char* __asan_default_options();
extern "C" const char* __asan_default_options() { return "intercept_tls_get_addr=0"; }
