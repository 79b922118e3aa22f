# frozen: its fixtures were recorded with a hook that did not trace `_thread` threads (before 23787ef; today's traces them, threads started from C still go untraced): it pins rule `unseen-thread`; cargo xtask record-merge-corpus leaves them.
# 17.2: code in a thread started with _thread.start_new_thread (not threading): the 3.11 hook
# never traces it, so USDT's returns of it cannot be placed; the trace must say so.
import _thread
import time


def work(n):
    return n * 2


def body(done):
    work(3)
    done.append(1)


done = []
_thread.start_new_thread(body, (done,))
while not done:
    time.sleep(0.01)
work(1)
