import { isKnownEventName } from '../events/parse-event.js';
import { KNOWN_EVENTS } from '../events/types.js';
import type { Logger } from './logger.js';
import { closest } from './suggest.js';

/**
 * Warns when `receiver.on()` is given a name payhook does not know (from JavaScript, or through a
 * cast): the handler is kept and runs for events of exactly that name, but a misspelled name
 * would otherwise leave the real event acknowledged and handled by nobody, without a word.
 */
export function warnIfUnknownName(logger: Logger, name: string): void {
  if (isKnownEventName(name)) return;
  const suggestion = closest(name, KNOWN_EVENTS);
  const guess = suggestion === undefined ? '' : ` did you mean '${suggestion}'?`;
  logger.warn(
    { event: name, ...(suggestion === undefined ? {} : { suggestion }) },
    `payhook: receiver.on('${name}'): not an event name payhook knows;${guess} For an event payhook does not know yet, register it with receiver.onUnknown('${name}', handler).`,
  );
}
