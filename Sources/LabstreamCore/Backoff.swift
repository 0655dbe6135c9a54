/// The capped doubling every backoff here follows: `first`, doubled once per step, never past
/// `cap`. Pure.
public enum Backoff {
    public static func doubled(_ first: Double, steps: Int, cap: Double) -> Double {
        min(cap, first * Double(1 << min(max(steps, 0), 30)))
    }
}
