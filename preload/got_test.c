/* got_test.c — got.c without a device: a program linked with
 * testdata/got/target.c's library (built twice: lazy binding and -z now,
 * the latter with its GOT in read-only relocation memory) has its slot
 * for swvt_value rewritten to a wrapper; a slot that asks for another
 * version is left alone; a skipped object is left alone; a second pass
 * finds nothing left to do; a lazy slot whose name the global scope
 * resolves elsewhere is left. Run as
 * `got-test-lazy [unbound|call-first|interposed]`
 * and `got-test-now call-first`. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "got.h"

int swvt_value(void);

static int wrapped(void)
{
	return 2;
}

static int failures;

static void expect(const char *what, int got, int want)
{
	if (got != want) {
		printf("FAIL %s: %d, want %d\n", what, got, want);
		failures++;
	} else {
		printf("ok   %s\n", what);
	}
}

extern ElfW(Dyn) _DYNAMIC[];

int main(int argc, char **argv)
{
	int bound = argc > 1 && !strcmp(argv[1], "call-first"), unbound = argc > 1 && !strcmp(argv[1], "unbound");
	void *real = dlsym(RTLD_DEFAULT, "swvt_value");
	struct swv_patch other = {"swvt_value", "SWVT_9.9", real, (void *)wrapped};
	struct swv_patch p = {"swvt_value", "SWVT_1.1", real, (void *)wrapped};
	const void *self[] = {_DYNAMIC};

	if (!real) {
		printf("FAIL swvt_value not found\n");
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "interposed")) {
		/* the global scope resolves swvt_value to something else than
		 * the "real" function given (as when another library interposes
		 * it): a lazy slot is left to that */
		struct swv_patch q = {"swvt_value", "SWVT_1.1", (void *)main, (void *)wrapped};

		expect("slots rewritten when another definition wins", swv_got_patch(&q, 1, NULL, 0), 0);
		expect("the call when another definition wins", swvt_value(), 1);
		return failures ? 1 : 0;
	}
	if (unbound) {
		/* a lazy slot that asks for the version: rewritten before any call */
		expect("unbound slots rewritten", swv_got_patch(&p, 1, NULL, 0), 1);
		expect("the first call after the patch", swvt_value(), 2);
		return failures ? 1 : 0;
	}
	if (bound) {
		expect("the real call before any patch", swvt_value(), 1);
	} else {
		/* a lazy slot (no call made yet) asking for SWVT_1.1 is not one
		 * asking for SWVT_9.9; the call then binds it */
		expect("slots rewritten for another version", swv_got_patch(&other, 1, NULL, 0), 0);
		expect("the call after a patch for another version", swvt_value(), 1);
	}
	expect("slots rewritten with this program skipped", swv_got_patch(&p, 1, self, 1), 0);
	expect("the call with this program skipped", swvt_value(), 1);
	expect("slots rewritten", swv_got_patch(&p, 1, NULL, 0), 1);
	expect("the call after the patch", swvt_value(), 2);
	expect("slots rewritten again", swv_got_patch(&p, 1, NULL, 0), 0);
	expect("the call after a second patch", swvt_value(), 2);
	return failures ? 1 : 0;
}
