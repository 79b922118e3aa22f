class Temp:
    def __init__(self, c):
        self._c = c

    @property
    def celsius(self):
        return self._c

    @celsius.setter
    def celsius(self, v):
        if v < -273:
            raise ValueError("below zero")
        self._c = v

    @property
    def fahrenheit(self):
        return self._c * 9 / 5 + 32


t = Temp(10)
t.celsius = 20
try:
    t.celsius = -300
except ValueError:
    pass
print(t.celsius, t.fahrenheit)
