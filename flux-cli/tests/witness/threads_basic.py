import threading

results = [None, None, None]  # one slot per worker: the order of completion does not show


class Worker(threading.Thread):
    """A thread whose repr is deterministic (Thread's shows its ident and a racy state)."""

    def __repr__(self):
        return "Worker(%s)" % self.name


def work(slot, n):
    total = 0
    for i in range(n):
        total += square(i)
    results[slot] = total


def square(x):
    return x * x


def main():
    # The workers run concurrently with this frame: its locals must not show their progress.
    threads = [Worker(target=work, args=(i, i + 2), name="w%d" % i) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(threads)


n = main()
print(n, results)
