import packageJson from '../package.json' with { type: 'json' };

/** This package's version, read from its package.json when it is built. */
export const VERSION: string = packageJson.version;
