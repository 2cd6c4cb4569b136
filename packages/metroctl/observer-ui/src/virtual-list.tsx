/**
 * A windowed list: of many rows of one fixed height, only those in view (and
 * a few around them) are in the DOM, so a list of 1,000 nodes or log lines
 * costs the same to render as one of 30.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

/** Rows drawn beyond the visible ones on each side, so fast scrolling shows no gap. */
const overscan = 8;

export interface VirtualListProps<T> {
  items: readonly T[];
  rowHeight: number;
  /** Height of the scrolling box, in pixels. */
  height: number;
  row: (item: T, index: number) => ComponentChildren;
  /** Keep the view at the bottom while it is there (follow new log lines). */
  stickToBottom?: boolean;
  className?: string;
  testId?: string;
}

/** The list; see the module comment. */
export function VirtualList<T>(props: VirtualListProps<T>) {
  const { items, rowHeight, height, row } = props;
  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const atBottom = useRef(true);

  useEffect(() => {
    const el = box.current;
    if (props.stickToBottom && el && atBottom.current) {
      el.scrollTop = el.scrollHeight;
      setScrollTop(el.scrollTop);
    }
  }, [items.length, props.stickToBottom]);

  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(items.length, Math.ceil((scrollTop + height) / rowHeight) + overscan);
  const rows: ComponentChildren[] = [];
  for (let i = first; i < last; i++) {
    rows.push(
      <div class="vrow" style={{ top: `${i * rowHeight}px`, height: `${rowHeight}px` }} key={i}>
        {row(items[i], i)}
      </div>,
    );
  }
  return (
    <div
      ref={box}
      class={`vlist ${props.className ?? ""}`}
      style={{ height: `${height}px` }}
      data-testid={props.testId}
      onScroll={(e) => {
        const el = e.currentTarget;
        atBottom.current = el.scrollTop + el.clientHeight >= el.scrollHeight - rowHeight;
        setScrollTop(el.scrollTop);
      }}
    >
      <div class="vspace" style={{ height: `${items.length * rowHeight}px` }}>
        {rows}
      </div>
    </div>
  );
}
