#if canImport(Glibc)
    import Glibc
#endif

/// The one place a Labstream failure becomes an errno for the kernel.
public enum ErrnoMap {
    public static func errno(for error: LabstreamError) -> Int32 {
        switch error {
        case .notFound: return ENOENT
        case .notADirectory: return ENOTDIR
        case .isADirectory: return EISDIR
        case .readOnly: return EROFS
        case .noAttribute: return ENODATA
        case .attributeBufferTooSmall: return ERANGE
        case .unsupportedAttributeWrite, .localSideFile: return EPERM
        case .fetchFailed, .serverUnavailable, .authenticationFailed, .malformedResponse, .refused, .timedOut:
            return EIO
        case .remoteChanged: return ESTALE
        case .noSpace, .overBudget: return ENOSPC
        case .storage: return EIO
        case .invalidArgument: return EINVAL
        case .permission, .accessRefused: return EACCES
        }
    }

    /// Any error thrown below the filesystem engine, mapped without losing the typed cases.
    public static func errno(for error: any Error) -> Int32 {
        if let e = error as? LabstreamError { return errno(for: e) }
        if let e = error as? SyscallError { return e.code == ENOSPC ? ENOSPC : EIO }
        return EIO
    }
}
