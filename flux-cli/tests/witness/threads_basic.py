import threading

results = {}


class Worker(threading.Thread):
    """A thread whose repr is deterministic (Thread's shows its ident and a racy state)."""

    def __repr__(self):
        return "Worker(%s)" % self.name


def work(name, n):
    total = 0
    for i in range(n):
        total += square(i)
    results[name] = total


def square(x):
    return x * x


def main():
    # The workers run concurrently with this frame: its locals must not show their progress.
    threads = [Worker(target=work, args=("t%d" % i, i + 2), name="w%d" % i) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(threads)


n = main()
print(n, sorted(results.items()))
