/** A line saying that a view's live stream is not live, and why. */
import type { StreamStatus } from "./observer-api";

/** Nothing while the stream is live; otherwise what is wrong with it. */
export function StreamBanner(props: { status: StreamStatus; what: string }) {
  const { status } = props;
  if (status.kind === "live") return null;
  return (
    <p class={`banner ${status.kind}`} data-testid="stream-banner">
      {status.kind === "connecting"
        ? `connecting to the ${props.what} stream…`
        : `${props.what}: ${status.message}`}
    </p>
  );
}
