/** The channel on which a committed outbox write wakes the delivery workers (every instance). */
export const WAKE_CHANNEL = 'payhook_deliveries';
