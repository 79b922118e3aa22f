# 17.2: code in a thread started with _thread.start_new_thread (not threading) is traced like
# any other thread's, an exception it lets escape included.
import _thread
import sys

done = []
lock = _thread.allocate_lock()
finished = _thread.allocate_lock()
finished.acquire()


def square(x):
    return x * x


def work(n):
    total = 0
    for i in range(n):
        total += square(i)
    with lock:
        done.append(total)
    boom(n)


def boom(n):
    raise ValueError("thread %d" % n)


def report(u):
    # Runs in the thread, after its frames unwound: the main thread may go on.
    done.append(type(u.exc_value).__name__)
    finished.release()


sys.unraisablehook = report
_thread.start_new_thread(work, (4,))
finished.acquire()
print(done)
