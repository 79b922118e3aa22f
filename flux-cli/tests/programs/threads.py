import threading


def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


ts = [threading.Thread(target=work, args=(k,)) for k in (3, 4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
