// page.js - the fixed parts of index.html that the modules write into: the
// top bar, the main area, the banner and the toast. Looked up once, when the
// module is first imported (module scripts run after the document is parsed).

const $ = (sel) => document.querySelector(sel);
export const ui = {
  topbar: $("#topbar"),
  skipLink: $("#skip-link"),
  main: $("#main"),
  banner: $("#banner"),
  bannerText: $("#banner-text"),
  bannerClose: $("#banner-close"),
  toast: $("#toast"),
  userName: $("#user-name"),
  userRole: $("#user-role"),
  logout: $("#logout"),
  navUsers: $("#nav-users"),
};
