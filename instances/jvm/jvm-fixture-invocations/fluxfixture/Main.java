package fluxfixture;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.IntUnaryOperator;

/**
 * flux's JVM witness program: every method of this package counts its own activations, and the
 * program prints the counts at the end ({@code COUNT <class>.<method> <n>}). A trace of the run
 * must give exactly these numbers, interpreted ({@code -Xint}) or JIT-compiled alike.
 *
 * <p>It covers recursion ({@link #fib}), interface dispatch ({@link Shape#area} on two classes),
 * an exception thrown two frames below its handler ({@link #level3} through {@link #level2} to
 * {@link #level1}), a second thread ({@link Worker#run}) and lambdas (a lambda body and a method
 * reference, called through {@link IntUnaryOperator}). The counters are one array indexed by
 * constants, updated with no method of this package (the atomic array's methods are the JDK's),
 * so counting adds no call of its own. {@code ROUNDS} is large enough for C1 and C2 to compile
 * the hot methods partway through the run.
 */
public final class Main {
    static final String[] NAMES = {
        "Main.main", "Main.fib", "Main.sumAreas", "Main.level1", "Main.level2", "Main.level3",
        "Main.applyAll", "Main.lambda$main$0", "Main.twice", "Main.square",
        "Square.<init>", "Square.area", "Circle.<init>", "Circle.area",
        "Worker.<init>", "Worker.run", "Worker.work", "Main.<clinit>",
    };
    static final int MAIN = 0, FIB = 1, SUM_AREAS = 2, LEVEL1 = 3, LEVEL2 = 4, LEVEL3 = 5,
            APPLY_ALL = 6, LAMBDA = 7, TWICE = 8, SQUARE = 9, SQUARE_INIT = 10, SQUARE_AREA = 11,
            CIRCLE_INIT = 12, CIRCLE_AREA = 13, WORKER_INIT = 14, WORKER_RUN = 15,
            WORKER_WORK = 16, CLINIT = 17;
    static final AtomicLongArray N = new AtomicLongArray(NAMES.length);

    static {
        N.incrementAndGet(CLINIT);
    }

    static int fib(int n) {
        N.incrementAndGet(FIB);
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static double sumAreas(List<Shape> shapes) {
        N.incrementAndGet(SUM_AREAS);
        double s = 0;
        for (Shape sh : shapes) {
            s += sh.area();
        }
        return s;
    }

    static int level1(int i) {
        N.incrementAndGet(LEVEL1);
        try {
            return level2(i);
        } catch (IllegalStateException e) {
            return -1;
        }
    }

    static int level2(int i) {
        N.incrementAndGet(LEVEL2);
        return level3(i) + 1;
    }

    static int level3(int i) {
        N.incrementAndGet(LEVEL3);
        if (i % 3 == 0) {
            throw new IllegalStateException("multiple of three: " + i);
        }
        return i;
    }

    static long applyAll(IntUnaryOperator op, int times) {
        N.incrementAndGet(APPLY_ALL);
        long s = 0;
        for (int i = 0; i < times; i++) {
            s += op.applyAsInt(i);
        }
        return s;
    }

    static int twice(int x) {
        N.incrementAndGet(TWICE);
        return 2 * x;
    }

    static int square(int x) {
        N.incrementAndGet(SQUARE);
        return x * x;
    }

    public static void main(String[] args) throws InterruptedException {
        N.incrementAndGet(MAIN);
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        Worker w = new Worker(rounds);
        Thread t = new Thread(w, "flux-worker");
        t.start();
        long acc = 0;
        List<Shape> shapes = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            shapes.add(i % 2 == 0 ? new Square(i) : new Circle(i));
        }
        for (int r = 0; r < rounds; r++) {
            acc += fib(10);
            acc += (long) sumAreas(shapes);
            acc += level1(r);
        }
        acc += applyAll(x -> {
            N.incrementAndGet(LAMBDA);
            return twice(x) + 1;
        }, rounds);
        acc += applyAll(Main::square, rounds);
        t.join();
        System.out.println("RESULT " + acc + " " + w.total);
        for (int i = 0; i < NAMES.length; i++) {
            System.out.println("COUNT fluxfixture." + NAMES[i] + " " + N.get(i));
        }
    }
}

interface Shape {
    double area();
}

final class Square implements Shape {
    private final double side;

    Square(double side) {
        Main.N.incrementAndGet(Main.SQUARE_INIT);
        this.side = side;
    }

    @Override
    public double area() {
        Main.N.incrementAndGet(Main.SQUARE_AREA);
        return side * side;
    }
}

final class Circle implements Shape {
    private final double r;

    Circle(double r) {
        Main.N.incrementAndGet(Main.CIRCLE_INIT);
        this.r = r;
    }

    @Override
    public double area() {
        Main.N.incrementAndGet(Main.CIRCLE_AREA);
        return 3.0 * r * r;
    }
}

final class Worker implements Runnable {
    private final int rounds;
    long total;

    Worker(int rounds) {
        Main.N.incrementAndGet(Main.WORKER_INIT);
        this.rounds = rounds;
    }

    @Override
    public void run() {
        Main.N.incrementAndGet(Main.WORKER_RUN);
        for (int i = 0; i < rounds; i++) {
            total += work(i);
        }
    }

    int work(int i) {
        Main.N.incrementAndGet(Main.WORKER_WORK);
        return i % 7;
    }
}
