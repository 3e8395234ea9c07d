"""problems.py - how the tests/docs checks report: each problem on its own
line on stderr as it is found, then one verdict line; the exit status says
whether there was any (make test stops on 1)."""
import sys


class Problems:
    def __init__(self, name):
        self.name = name
        self.found = []
        sys.stdout.reconfigure(line_buffering=True)

    def fail(self, msg):
        self.found.append(msg)
        print("%s: %s" % (self.name, msg), file=sys.stderr)

    def say(self, msg):
        print("%s: %s" % (self.name, msg))

    def finish(self, subject, ok):
        """Exit status: 1 with "N problem(s) in SUBJECT", else 0 with "ok (OK)"."""
        if self.found:
            print("%s: %d problem(s) in %s" % (self.name, len(self.found), subject), file=sys.stderr)
            return 1
        self.say("ok (%s)" % ok)
        return 0
