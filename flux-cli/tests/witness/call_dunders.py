class Table:
    def __init__(self, rows):
        self.rows = rows

    def __getitem__(self, i):
        return self.rows[i]

    def __contains__(self, v):
        return v in self.rows

    def __getattr__(self, name):
        if name.startswith("col_"):
            return [r[int(name[4:])] for r in self.rows]
        raise AttributeError(name)

    def __call__(self, k):
        return len(self.rows) * k

    def __bool__(self):
        return bool(self.rows)


t = Table([(1, 2), (3, 4)])
print(t[1], (1, 2) in t, t.col_0, t(3), bool(t), getattr(t, "nope", "default"))
