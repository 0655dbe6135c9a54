/// How many playback checks (libmpv probes, a process each, CPU-bound while they decode) run at
/// once: one per processor the daemon may run on, at most four, so a long pin's checks do not
/// queue one behind another on a machine that has cores to spare, and never take more than
/// the machine has. The fill itself is network-bound and needs next to none.
public enum ProbeParallelism {
    public static func count(processors: Int) -> Int { min(max(processors, 1), 4) }
}
