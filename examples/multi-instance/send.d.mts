/** Delivers one body until an instance answers 200; `onAnswer` sees every status (0: no connection). */
export function deliver(
  url: string,
  body: string,
  options?: { tries?: number; pauseMs?: number; onAnswer?: (status: number, body: string) => unknown },
): Promise<{ attempts: number; body: unknown }>;

/** Streams `count` events to `urls` with `parallel` deliveries at once; returns the checksums sent. */
export function stream(options: {
  urls: string[];
  businessId: string;
  count: number;
  parallel?: number;
  onProgress?: (delivered: number) => void;
  onAnswer?: (status: number, body: string) => unknown;
}): Promise<string[]>;
