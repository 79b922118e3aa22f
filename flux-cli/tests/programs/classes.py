class Acc:
    def __init__(self):
        self.items = []

    def add(self, x):
        self.items.append(x)
        return self

    @property
    def size(self):
        return len(self.items)


a = Acc()
a.add(1).add(2)
n = a.size
