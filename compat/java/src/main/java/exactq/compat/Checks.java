package exactq.compat;

/**
 * What the check programs share: a check that does not hold throws {@link Mismatch}, and
 * {@link #main} turns a program's outcome into what the Go tests read (compat/java_test.go
 * runJava): its OK line and exit status 0, or a "FAIL:" line and exit status 1 (2 for a
 * wrong command line).
 */
final class Checks {
    private Checks() {}

    /** A check that did not hold: what was expected and what happened. */
    static final class Mismatch extends RuntimeException {
        Mismatch(String msg) {
            super(msg);
        }
    }

    static void check(boolean ok, String fmt, Object... args) {
        if (!ok) {
            throw new Mismatch(String.format(fmt, args));
        }
    }

    /** The body of a check program. */
    interface Program {
        void run() throws Exception;
    }

    /**
     * Runs a check program given its command line: exits 2 printing usage unless there are
     * exactly n arguments; otherwise runs program and prints ok and exits 0, or prints a
     * "FAIL:" line (with the stack trace of an exception that is not a {@link Mismatch})
     * and exits 1.
     */
    static void main(String[] args, int n, String usage, String ok, Program program) {
        if (args.length != n) {
            System.err.println("usage: " + usage);
            System.exit(2);
        }
        try {
            program.run();
            System.out.println(ok);
            System.exit(0);
        } catch (Mismatch m) {
            System.err.println("FAIL: " + m.getMessage());
            System.exit(1);
        } catch (Throwable t) {
            System.err.println("FAIL: unexpected " + t);
            t.printStackTrace(System.err);
            System.exit(1);
        }
    }
}
