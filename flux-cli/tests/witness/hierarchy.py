class Shape:
    def __init__(self, name):
        self.name = name

    def area(self):
        return 0

    def describe(self):
        return "%s with area %s" % (self.name, self.area())


class Rect(Shape):
    def __init__(self, w, h):
        super().__init__("rect")
        self.w = w
        self.h = h

    def area(self):
        return self.w * self.h


class Square(Rect):
    def __init__(self, s):
        super().__init__(s, s)
        self.name = "square"

    def describe(self):
        base = super().describe()
        return base + "!"


print([s.describe() for s in (Shape("blob"), Rect(2, 3), Square(4))])
