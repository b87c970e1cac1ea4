/**
 * The console's building blocks: a page frame, fields, buttons, notices, times, tables, a
 * confirmation dialog, a shown-once secret and paged lists. Every control has a label; every
 * refusal shows the API's `{"error"}` text; nothing here keeps a secret beyond its component.
 */
import type { ComponentChildren, InputHTMLAttributes, SelectHTMLAttributes } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { errorText } from '../api.ts';

export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · Relayplane`;
  }, [props.title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title" tabIndex={-1}>
          {props.title}
        </h1>
        {props.actions && <div class="actions">{props.actions}</div>}
      </header>
      {props.children}
    </section>
  );
}

/** A refusal or failure, announced to screen readers. */
export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p class="notice error" role="alert">
      {errorText(error)}
    </p>
  );
}

export function Done({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice ok" role="status">
      {children}
    </p>
  );
}

/** What to do when a list is empty. */
export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p>
        <strong>{title}</strong>
      </p>
      {children && <p>{children}</p>}
    </div>
  );
}

/** Busy indicator for a long operation (an indeterminate progress bar with a label). */
export function Busy({ label }: { label: string }) {
  return (
    <p class="busy" role="status">
      <progress aria-label={label} /> {label}
    </p>
  );
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** A time in the browser's zone; the UTC time on hover (title) and in `datetime`. */
export function Time({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">—</span>;
  const d = new Date(at);
  if (Number.isNaN(d.getTime())) return <span>{at}</span>;
  return (
    <time
      dateTime={d.toISOString()}
      title={`${d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ' UTC')}`}
    >
      {dateTime.format(d)}
    </time>
  );
}

let fieldSeq = 0;
export function useId(prefix: string): string {
  const ref = useRef<string | undefined>(undefined);
  if (ref.current === undefined) ref.current = `${prefix}-${++fieldSeq}`;
  return ref.current;
}

type InputProps = InputHTMLAttributes<HTMLInputElement>;

/** A labelled input; `hint` is read with it (aria-describedby). */
export function Field(props: InputProps & { label: string; hint?: string }) {
  const { label, hint, ...input } = props;
  const id = useId('f');
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input id={id} aria-describedby={hint ? `${id}-hint` : undefined} {...input} />
      {hint && (
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      )}
    </div>
  );
}

export function Select(
  props: SelectHTMLAttributes<HTMLSelectElement> & {
    label: string;
    options: Array<{ value: string; label: string }>;
  },
) {
  const { label, options, ...select } = props;
  const id = useId('s');
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} {...select}>
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </div>
  );
}

export function Check(props: {
  label: string;
  checked: boolean;
  onChange: (checked: boolean) => void;
  disabled?: boolean;
}) {
  const id = useId('c');
  return (
    <div class="check">
      <input
        id={id}
        type="checkbox"
        checked={props.checked}
        disabled={props.disabled}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
      />
      <label for={id}>{props.label}</label>
    </div>
  );
}

/**
 * A table that scrolls sideways on narrow screens instead of overflowing the page. While it
 * scrolls, its box is a named, focusable region, so keyboard users can scroll it too (WCAG
 * 2.1.1; axe's scrollable-region-focusable); otherwise it is no extra tab stop.
 */
export function Table({
  caption,
  head,
  children,
}: {
  caption: string;
  head: string[];
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const [scrolls, setScrolls] = useState(false);
  useEffect(() => {
    const wrap = ref.current;
    if (!wrap) return;
    const measure = () => setScrolls(wrap.scrollWidth > wrap.clientWidth + 1);
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(wrap);
    const table = wrap.firstElementChild;
    if (table) observer.observe(table);
    return () => observer.disconnect();
  }, []);
  return (
    <div
      ref={ref}
      class="table-wrap"
      {...(scrolls ? { tabIndex: 0, role: 'region', 'aria-label': `${caption} (scrolls sideways)` } : {})}
    >
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h} scope="col">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** Runs an action, tracking busy and error; the action's refusal text is kept for display. */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = useCallback(
    async (...args: A) => {
      setBusy(true);
      setError(undefined);
      try {
        await action(...args);
      } catch (e) {
        setError(e);
      } finally {
        setBusy(false);
      }
    },
    [action],
  );
  return { run, busy, error, setError };
}

/** Loads once (and again on `reload()` or when `deps` change). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [tick, ...deps]);
  return { ...state, reload: () => setTick((t) => t + 1) };
}

/**
 * A list paged with the API's cursors: the first page, then "Load more" appends the next one
 * (`next_cursor` null: the last page).
 */
export function usePaged<T>(
  fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; next: string | null }>,
  deps: unknown[] = [],
) {
  const [items, setItems] = useState<T[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(undefined);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    setError(undefined);
    fetchPage(undefined).then(
      (page) => {
        if (!live) return;
        setItems(page.items);
        setNext(page.next);
        setLoading(false);
      },
      (e) => {
        if (!live) return;
        setError(e);
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
  }, [tick, ...deps]);
  const more = async () => {
    if (next === null) return;
    setLoading(true);
    try {
      const page = await fetchPage(next);
      setItems((old) => [...old, ...page.items]);
      setNext(page.next);
    } catch (e) {
      setError(e);
    } finally {
      setLoading(false);
    }
  };
  return { items, next, loading, error, more, reload: () => setTick((t) => t + 1) };
}

/** The "Load more" control of a paged list. */
export function More({
  list,
  label = 'Load more',
}: {
  list: { next: string | null; loading: boolean; more: () => Promise<void> };
  label?: string;
}) {
  if (list.next === null) return null;
  return (
    <p>
      <button type="button" class="secondary" disabled={list.loading} onClick={() => void list.more()}>
        {list.loading ? 'Loading…' : label}
      </button>
    </p>
  );
}

/**
 * A secret shown once: a read-only field and a copy button. It lives in the state of the page
 * that received it, so leaving the page drops it; the API never shows it again.
 */
export function SecretOnce({
  label,
  value,
  onDismiss,
}: {
  label: string;
  value: string;
  onDismiss: () => void;
}) {
  const id = useId('secret');
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
    } catch {
      (document.getElementById(id) as HTMLInputElement | null)?.select();
    }
  };
  return (
    <section class="secret" aria-label={label}>
      <p>
        <strong>{label}</strong> — shown once. Copy it now: it cannot be shown again.
      </p>
      <div class="secret-row">
        <input
          id={id}
          class="mono"
          readOnly
          value={value}
          aria-label={label}
          onFocus={(e) => e.currentTarget.select()}
        />
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" class="secondary" onClick={onDismiss}>
          Done
        </button>
      </div>
    </section>
  );
}

/**
 * A confirmation in a modal `<dialog>` (focus moves into it and Escape cancels). With `typed`, the
 * confirm button stays disabled until that exact text is typed.
 */
export function Confirm(props: {
  open: boolean;
  title: string;
  children: ComponentChildren;
  confirmLabel: string;
  typed?: string;
  danger?: boolean;
  busy?: boolean;
  error?: unknown;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [text, setText] = useState('');
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) {
      setText('');
      dialog.showModal();
    } else if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  const titleId = useId('dlg');
  const ready = props.typed === undefined || text === props.typed;
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (ready) props.onConfirm();
        }}
      >
        <h2 id={titleId}>{props.title}</h2>
        <div>{props.children}</div>
        {props.typed !== undefined && (
          <Field
            label={`Type ${props.typed} to confirm`}
            value={text}
            autoComplete="off"
            onInput={(e) => setText(e.currentTarget.value)}
          />
        )}
        <ErrorNote error={props.error} />
        <div class="actions">
          <button type="submit" class={props.danger ? 'danger' : ''} disabled={!ready || props.busy}>
            {props.busy ? 'Working…' : props.confirmLabel}
          </button>
          <button type="button" class="secondary" onClick={props.onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </dialog>
  );
}

export function Badge({
  tone,
  children,
}: {
  tone?: 'ok' | 'warn' | 'bad' | 'info';
  children: ComponentChildren;
}) {
  return <span class={`badge ${tone ?? 'info'}`}>{children}</span>;
}

/** A Confirm's onCancel: closes it and forgets the action's last refusal. */
export const closing = (close: () => void, action: { setError: (e: unknown) => void }) => () => {
  close();
  action.setError(undefined);
};

/** A form's onSubmit: runs the action instead of navigating. */
export const submitting = (run: () => Promise<void>) => (e: Event) => {
  e.preventDefault();
  void run();
};
