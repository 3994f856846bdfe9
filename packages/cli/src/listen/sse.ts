/** One server-sent event: its type (`message` when unnamed), its id, and its data lines joined. */
export interface ServerSentEvent {
  event: string;
  id?: string;
  data: string;
}

/**
 * Reads server-sent events from a byte stream (the text/event-stream format: `field: value`
 * lines, a blank line ending each event, `:` lines as comments), calling `onActivity` for every
 * chunk, comments included, so that a caller can tell a live connection from a dead one.
 *
 * @example
 * ```ts
 * for await (const message of readServerSentEvents(response.body, () => (lastSeen = Date.now()))) {
 *   if (message.event === 'webhook') handle(JSON.parse(message.data));
 * }
 * ```
 */
export async function* readServerSentEvents(
  body: AsyncIterable<Uint8Array>,
  onActivity: () => void = () => {},
): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let id: string | undefined;
  let data: string[] = [];
  for await (const chunk of body) {
    onActivity();
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.search(/\r\n|\r|\n/);
    while (newline !== -1) {
      // A CR at the end of what has come may be the first half of a CRLF: wait for the rest.
      if (buffer[newline] === '\r' && newline === buffer.length - 1) break;
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      if (line === '') {
        if (data.length > 0 || event !== '') {
          yield { event: event || 'message', ...(id !== undefined ? { id } : {}), data: data.join('\n') };
        }
        event = '';
        data = [];
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id' && !value.includes('\0')) id = value;
      }
      newline = buffer.search(/\r\n|\r|\n/);
    }
  }
}
