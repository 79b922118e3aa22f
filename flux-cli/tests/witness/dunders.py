class Vec:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __eq__(self, other):
        return isinstance(other, Vec) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self):
        return hash((self.x, self.y))

    def __add__(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def __len__(self):
        return 2

    def __repr__(self):
        return "Vec(%r, %r)" % (self.x, self.y)

    def __lt__(self, other):
        return (self.x, self.y) < (other.x, other.y)


a = Vec(1, 2)
b = Vec(3, 4)
c = a + b
print(c == Vec(4, 6), len(c), sorted([b, a]), {a, Vec(1, 2)})
