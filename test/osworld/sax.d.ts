/** The part of sax (a dependency of dbus-next's xml2js) the accessibility test uses. */
declare module "sax" {
  interface QualifiedAttribute {
    name: string;
    value: string;
    prefix: string;
    local: string;
    uri: string;
  }
  interface QualifiedTag {
    name: string;
    uri: string;
    attributes: Record<string, QualifiedAttribute>;
  }
  interface SAXParser {
    onerror: (err: Error) => void;
    onopentag: (tag: QualifiedTag) => void;
    ontext: (text: string) => void;
    onclosetag: (name: string) => void;
    write(text: string): SAXParser;
    close(): SAXParser;
  }
  function parser(strict: boolean, options: { xmlns: boolean }): SAXParser;
  const sax: { parser: typeof parser };
  export default sax;
}
