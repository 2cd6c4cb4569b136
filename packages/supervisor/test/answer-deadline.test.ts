/**
 * answerDeadline: an answer that arrived while this process ran late wins
 * over the deadline that passed meanwhile; with no answer, the deadline
 * fires with its reason; the caller's signal ends it sooner, with the
 * caller's reason; cleared, it never fires and leaves the caller's signal.
 */
import { once } from "node:events";
import { createServer, connect, type Server, type Socket } from "node:net";
import { answerDeadline } from "../src/answer-deadline";
import { runLate } from "../src/run-late";

describe("answerDeadline", () => {
  let server: Server;
  let client: Socket;
  let peer: Socket;

  beforeEach(async () => {
    server = createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("no TCP address");
    const accepted = once(server, "connection");
    client = connect(address.port, "127.0.0.1");
    await once(client, "connect");
    [peer] = (await accepted) as [Socket];
  });

  afterEach(async () => {
    client.destroy();
    peer.destroy();
    server.close();
    await once(server, "close");
  });

  it("lets an answer already received win over the deadline that passed while the loop ran late", async () => {
    const deadline = answerDeadline(20, () => new Error("deadline"), new AbortController().signal);
    const outcome = Promise.race([
      once(client, "data").then(() => "answer"),
      once(deadline.signal, "abort").then(() => "deadline"),
    ]);
    // The answer is in the socket before the deadline passes, but this
    // process reads it only after: its loop is busy until well after both.
    peer.write("answer");
    runLate(100);
    expect(await outcome).toBe("answer");
    deadline.clear();
  });

  it("fires with its reason when no answer comes, never once cleared, and never when infinite", async () => {
    const never = new AbortController().signal;
    const deadline = answerDeadline(10, () => new Error("no answer within 10 ms"), never);
    await once(deadline.signal, "abort");
    expect(deadline.signal.reason).toEqual(new Error("no answer within 10 ms"));

    // Without a caller's signal: the deadline alone.
    const alone = answerDeadline(10, () => new Error("no answer, no caller"));
    await once(alone.signal, "abort");
    expect(alone.signal.reason).toEqual(new Error("no answer, no caller"));

    const cleared = answerDeadline(10, () => new Error("late"), never);
    cleared.clear();
    // No deadline at all (a plain timer of Infinity fires after 1 ms).
    const infinite = answerDeadline(Infinity, () => new Error("never"), never);
    const later = answerDeadline(50, () => new Error("later"), never);
    await once(later.signal, "abort");
    expect(cleared.signal.aborted).toBe(false);
    expect(infinite.signal.aborted).toBe(false);
    infinite.clear();
  });

  it("ends with the caller's signal, with its reason, and leaves it once cleared", async () => {
    const caller = new AbortController();
    const deadline = answerDeadline(60_000, () => new Error("deadline"), caller.signal);
    caller.abort(new Error("stopping"));
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.signal.reason).toEqual(new Error("stopping"));
    deadline.clear();

    const already = answerDeadline(60_000, () => new Error("deadline"), caller.signal);
    expect(already.signal.reason).toEqual(new Error("stopping"));
    already.clear();

    const live = new AbortController();
    const cleared = answerDeadline(60_000, () => new Error("deadline"), live.signal);
    cleared.clear();
    live.abort(new Error("later"));
    expect(cleared.signal.aborted).toBe(false);
  });
});
