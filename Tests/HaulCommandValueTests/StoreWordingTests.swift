import Glibc
import Haul
import HaulArchive
import HaulCommand
import HaulDigest
import HaulFailures
import HaulManifest
import HaulPlanner
import HaulStore
import XCTest

/// The store and the planner hand over values; these are the sentences people read for them.
final class StoreWordingTests: XCTestCase {
    private let destination = DestinationPath("data/a.csv")!

    /// A failure on the destination itself does not name it twice; one on another path names that path.
    func testAFailureNamesItsPathUnlessItIsTheDestination() {
        let denied = StoreError(operation: .renameInto, path: "data/a.csv", errno: EACCES)
        XCTAssertEqual(StoreWording.sentence(denied), "cannot rename into \"data/a.csv\": Permission denied")
        XCTAssertEqual(StoreWording.sentence(denied, about: "data/a.csv"), "cannot rename into it: Permission denied")
        XCTAssertEqual(
            StoreWording.sentence(denied, about: "other.csv"), "cannot rename into \"data/a.csv\": Permission denied")
        XCTAssertEqual(
            StoreWording.sentence(StoreError(operation: .setMode(0o755), path: "sdk", errno: EPERM)),
            "cannot set mode 0755 on \"sdk\": Operation not permitted")
    }

    /// haul's own finding replaces the system's words when there is one; a nested failure keeps its own.
    func testAProblemIsSaidInsteadOfTheErrno() {
        let escapes = StoreError(
            operation: .write, path: "d/a", errno: 0, problem: .parentEscapesRoot(parent: "d", target: "/srv/x"))
        XCTAssertEqual(
            StoreWording.sentence(escapes, about: "d/a"),
            "cannot write it: parent \"d\" is a symlink to /srv/x, outside root")
        let stuck = StoreError(
            operation: .renameInto, path: "sdk", errno: ENOTDIR,
            problem: .inTheWayNotPutBack(
                .fifo, aside: ".haul/tmp/sdk-1", SystemError(errno: EIO, path: ".haul/tmp/sdk-1")))
        XCTAssertEqual(
            StoreWording.sentence(stuck),
            "cannot rename into \"sdk\": a FIFO is in the way; it could not be put back, and is at .haul/tmp/sdk-1: "
                + "Input/output error")
        XCTAssertEqual(
            StoreWording.problem(.oldTreeNotPutBack(failed: EXDEV, back: EACCES, aside: ".haul/tmp/old")),
            "Invalid cross-device link; the old tree could not be put back either (Permission denied): it is at "
                + ".haul/tmp/old")
        XCTAssertEqual(
            StoreWording.sentence(SystemError(errno: EXDEV, path: "mnt", problem: .anotherMount)),
            "mnt: another file system is mounted there; it is left as it is")
    }

    /// The planner's obstacles and a prune's reasons to keep a file.
    func testObstaclesAndKeptFilesAreSaidUnderTheDestination() {
        XCTAssertEqual(StoreWording.obstacle(.inTheWay(.directory), about: destination), "a directory is in the way")
        XCTAssertEqual(
            StoreWording.obstacle(.inTheWay(.socket), about: destination),
            "something that is not a regular file is in the way")
        XCTAssertEqual(
            StoreWording.obstacle(.inTheWayOfTree(.symlink), about: destination),
            "a symlink is in the way of the folder the archive is unpacked into")
        XCTAssertEqual(
            StoreWording.obstacle(.holdsUsersFiles(["sdk/notes.txt"]), about: destination),
            "it holds 1 file the archive did not put there (\"sdk/notes.txt\"), kept with the folder")
        let unreadable = StoreError(operation: .inspect, path: "data/a.csv", errno: EACCES)
        XCTAssertEqual(
            StoreWording.obstacle(.failed(unreadable), about: destination), "cannot inspect it: Permission denied")
        XCTAssertEqual(StoreWording.kept(.modified, about: destination), "modified since haul wrote it")
        XCTAssertEqual(StoreWording.kept(.unidentified, about: destination), "could not be identified")
        XCTAssertEqual(
            StoreWording.kept(.obstacle(.failed(unreadable)), about: destination),
            "cannot inspect it: Permission denied")
    }

    func testTheStatesProblemsSayWhatTheyCost() {
        XCTAssertEqual(
            StoreWording.sentence(StateProblem.linesDropped(path: "/r/.haul/state", count: 1)),
            "/r/.haul/state: 1 line could not be read and was dropped; that file is hashed again")
        XCTAssertEqual(
            StoreWording.sentence(StateProblem.linesDropped(path: "/r/.haul/state", count: 3)),
            "/r/.haul/state: 3 lines could not be read and were dropped; those files are hashed again")
        XCTAssertEqual(
            StoreWording.sentence(StateProblem.tooLarge(path: "/r/.haul/state", size: 3 << 30, limit: 2 << 30)),
            "/r/.haul/state is 3221225472 bytes, more than the 2 GiB haul reads of a state; hashing every file to "
                + "rebuild it")
        XCTAssertEqual(
            StoreWording.sentence(StateProblem.journalUnreadable(SystemError(errno: EIO, path: "/r/.haul/journal"))),
            "cannot read /r/.haul/journal: Input/output error; the files it names are not pruned")
    }

    func testACorruptCacheEntrySaysWhatWasFoundAndWhetherItIsGone() {
        XCTAssertEqual(
            StoreWording.sentence(CorruptEntry(path: "c/sha256/ab/abc", found: .size(10, pinned: 9), removal: nil)),
            "the cache entry c/sha256/ab/abc is not the file of its digest (10 bytes, not the 9 the manifest pins): "
                + "removed")
        XCTAssertEqual(
            StoreWording.sentence(
                CorruptEntry(
                    path: "c/sha256/ab/abc", found: .notARegularFile(.fifo),
                    removal: SystemError(errno: EROFS, path: "c/sha256/ab/abc"))),
            "the cache entry c/sha256/ab/abc is not the file of its digest (a FIFO, not a regular file); it could not "
                + "be removed (Read-only file system)")
    }

    func testABusyRootNamesItsHolderAndWhatToDo() {
        XCTAssertEqual(
            StoreWording.sentence(RunLock.Failure.busy(root: "/srv", holder: "pid 7, haul sync a.yaml", shard: nil)),
            "another haul is syncing \"/srv\" (pid 7, haul sync a.yaml); wait for it, or run with --wait")
        XCTAssertEqual(
            StoreWording.sentence(RunLock.Failure.busy(root: "/srv", holder: nil, shard: nil, waited: 2.5)),
            "another haul is syncing \"/srv\" (holder unknown); waited 2.5 s (--wait-timeout)")
        XCTAssertEqual(
            StoreWording.sentence(PrivateAreaError.unsafe(path: "/srv/.haul/state", found: .kind(.fifo), rule: .state)),
            "/srv/.haul/state is a FIFO; haul's state must be a regular file")
    }

    func testAnUnpackedTreeThatIsNotPutInPlaceSaysWhy() throws {
        let member = UnpackFailure(archive: "tool.tar", member: "dev/null", rule: .special(.characterDevice))
        XCTAssertEqual(
            UnpackWording.sentence(member),
            "cannot unpack \"tool.tar\": member \"dev/null\": it is a character device: device nodes, FIFOs and "
                + "sockets are not unpacked")
        XCTAssertEqual(
            UnpackWording.rule(.symlinkTargetInvalid(.tooLong(bytes: 5000))),
            "it is a symlink whose target is 5000 bytes long, over \(DestinationPath.maximumBytes)")
        XCTAssertEqual(
            UnpackWording.sentence(TreeFailure.archiveNotRead(try XCTUnwrap(DestinationPath("sdk")))),
            "cannot unpack \"sdk\": the archive was not read")
    }
}
