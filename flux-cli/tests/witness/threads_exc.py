import threading

out = []
lock = threading.Lock()


def fragile(n):
    if n % 2:
        raise ValueError("odd %d" % n)
    return n


def worker(items):
    for n in items:
        try:
            v = fragile(n)
        except ValueError as e:
            v = str(e)
        with lock:
            out.append(v)


class Named(threading.Thread):
    """Thread's own repr shows its ident and a racy state: not a deterministic value."""

    def __repr__(self):
        return "Named(%s)" % self.name


def run_one(items):
    t = Named(target=worker, args=(items,), name="n%d" % len(items))
    t.start()
    t.join()
    return len(out)


print(run_one([1, 2]), run_one([3, 4, 5]), out)
