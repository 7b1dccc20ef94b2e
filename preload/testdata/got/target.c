/* target.c — the library whose calls got_test.c redirects: swvt_value
 * returns 1, and a wrapper that got.c points a caller's slot at returns
 * something else. */
int swvt_value(void);
int swvt_value(void)
{
	return 1;
}
