class Point:
    count = 0

    def __init__(self, x, y):
        self.x = x
        self.y = y
        Point.count += 1

    @classmethod
    def origin(cls):
        return cls(0, 0)

    @staticmethod
    def dist2(a, b):
        return (a.x - b.x) ** 2 + (a.y - b.y) ** 2

    def __repr__(self):
        return "Point(%d, %d)" % (self.x, self.y)


p = Point.origin()
q = Point(3, 4)
print(Point.dist2(p, q), Point.count, p, q)
