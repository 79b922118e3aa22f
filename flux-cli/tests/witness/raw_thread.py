# 17.2: code in a thread started with _thread.start_new_thread (not threading) is traced like
# any other thread's, an exception it lets escape included.
import _thread
import sys
import time

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
# Until the thread has left its last frame (its return would race the process's exit); the
# loop runs a varying number of times, so in code of another "file", which is not compared.
exec(compile("while count():\n    sleep(0.001)", "<wait>", "exec"), {"count": _thread._count, "sleep": time.sleep})
print(done)
