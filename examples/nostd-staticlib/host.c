/* A C host program for the no_std + alloc static library (src/lib.rs): it opens the
 * driver itself, hands the library `dlsym` as the resolver (the library never calls
 * dlopen), and checks what the library's GPU work returns. Built and linked by
 * `cargo xtask embedded` / `cargo xtask bundle`:
 *   cc host.c libnostd_staticlib_example.a -ldl -lpthread -o nostd-host
 * Without a driver it prints one line saying so and exits 0; a wrong value exits 1. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int cudadrv_example_init(void *(*resolve)(const char *, size_t));
int cudadrv_example_fill(unsigned n, unsigned value, unsigned *out_sum);
int cudadrv_example_add_one(unsigned n, unsigned rounds, unsigned *out_sum);

static void *driver;

/* The library asks for each function by its exported (versioned) symbol. */
static void *resolve(const char *symbol, size_t len) {
    (void)len; /* NUL-terminated */
    return dlsym(driver, symbol);
}

int main(void) {
    driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) {
        printf("nostd-host: no GPU, nothing was run: %s\n", dlerror());
        return 0;
    }
    if (cudadrv_example_init(resolve) != 0) {
        printf("nostd-host: FAILED: a driver table was installed before\n");
        return 1;
    }
    unsigned n = 1u << 20, sum = 0;
    int rc = cudadrv_example_fill(n, 3, &sum);
    if (rc == 100) { /* CUDA_ERROR_NO_DEVICE */
        printf("nostd-host: no GPU, nothing was run: CUDA_ERROR_NO_DEVICE\n");
        return 0;
    }
    if (rc != 0 || sum != 3u * n) {
        printf("nostd-host: FAILED: fill returned %d, sum %u (want %u)\n", rc, sum, 3u * n);
        return 1;
    }
    printf("nostd-host: memset and copy of %u words through the library: sum %u\n", n, sum);
    rc = cudadrv_example_add_one(n, 5, &sum);
    if (rc != 0 || sum != 5u * n) {
        printf("nostd-host: FAILED: add_one returned %d, sum %u (want %u)\n", rc, sum, 5u * n);
        return 1;
    }
    printf("nostd-host: 5 launches of a kernel over %u words, every word checked: sum %u\n", n, sum);
    printf("nostd-host: all values checked\n");
    return 0;
}
