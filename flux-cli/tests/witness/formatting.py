class Money:
    def __init__(self, cents):
        self.cents = cents

    def __str__(self):
        return "$%d.%02d" % divmod(self.cents, 100)

    def __format__(self, spec):
        if spec == "c":
            return "%dc" % self.cents
        return str(self)


def report(name, m):
    a = f"{name}: {m}"
    b = "{0} has {1:c}".format(name, m)
    c = "%s/%r" % (name, m.cents)
    return a, b, c, f"{m.cents:>6}|"


print(report("ann", Money(1234)))
