/**
 * Redis key names. Every key of one business shares the hash tag `{<prefix>:<business id>}`, so an
 * event's record and its business's lease index land in one cluster slot and one script can
 * touch both. The receiver's event key is `<business id>:<checksum>`.
 */
export interface KeyNames {
  /** The event's record (a hash). */
  record: string;
  /** The lease index of the event's business (a sorted set of members by lease expiry). */
  leases: string;
  /** The event's member in the lease index. */
  member: string;
  /** The hash tag, as stored in the set of tags. */
  tag: string;
  /** Prefix of every record of this tag: record = recordPrefix + member. */
  recordPrefix: string;
  /** Prefix of the order records of this tag's objects (per-object order). */
  objectPrefix: string;
}

export function keyNames(prefix: string, key: string): KeyNames {
  const split = key.lastIndexOf(':');
  const business = split === -1 ? '' : key.slice(0, split);
  const member = split === -1 ? key : key.slice(split + 1);
  return {
    ...tagKeys(prefix, business),
    member,
    record: `${tagKeys(prefix, business).recordPrefix}${member}`,
  };
}

/** Keys of one business's tag. */
export function tagKeys(
  prefix: string,
  business: string,
): Pick<KeyNames, 'leases' | 'recordPrefix' | 'objectPrefix' | 'tag'> {
  const tag = `{${prefix}:${business}}`;
  return { tag: business, leases: `${tag}:leases`, recordPrefix: `${tag}:e:`, objectPrefix: `${tag}:o:` };
}

/** The set of businesses seen (their lease indexes are where recovery looks). */
export function tagsKey(prefix: string): string {
  return `{${prefix}}:tags`;
}
